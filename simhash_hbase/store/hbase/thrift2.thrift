// The part of HBase's Thrift2 service (THBaseService, hbase-thrift 2.x) that
// simhash-hbase calls. Field ids and method names are those of the server's
// interface, so this subset is wire-compatible; everything unused is left out.

enum TDeleteType { DELETE_COLUMN = 0, DELETE_COLUMNS = 1 }
enum TBloomFilterType { NONE = 0, ROW = 1, ROWCOL = 2, ROWPREFIX_FIXED_LENGTH = 3 }
enum TCompressionAlgorithm { LZO = 0, GZ = 1, NONE = 2, SNAPPY = 3, LZ4 = 4, BZIP2 = 5, ZSTD = 6 }
enum TDataBlockEncoding { NONE = 0, PREFIX = 2, DIFF = 3, FAST_DIFF = 4, ROW_INDEX_V1 = 7 }
enum TThriftServerType { ONE = 1, TWO = 2 }

struct TColumn {
  1: required binary family,
  2: optional binary qualifier,
  3: optional i64 timestamp,
}

struct TColumnValue {
  1: required binary family,
  2: required binary qualifier,
  3: required binary value,
  4: optional i64 timestamp,
}

struct TResult {
  1: optional binary row,
  2: required list<TColumnValue> columnValues,
}

struct TGet {
  1: required binary row,
  2: optional list<TColumn> columns,
  7: optional map<binary, binary> attributes,
  12: optional i32 storeLimit,
  15: optional binary filterBytes,
}

struct TPut {
  1: required binary row,
  2: required list<TColumnValue> columnValues,
  3: optional i64 timestamp,
}

struct TDelete {
  1: required binary row,
  2: optional list<TColumn> columns,
  3: optional i64 timestamp,
  4: optional TDeleteType deleteType = 1,
}

struct TScan {
  1: optional binary startRow,
  2: optional binary stopRow,
  3: optional list<TColumn> columns,
  4: optional i32 caching,
  12: optional bool cacheBlocks,
  18: optional binary filterBytes,
}

struct THRegionInfo {
  1: required i64 regionId,
  2: required binary tableName,
  3: optional binary startKey,
  4: optional binary endKey,
}

struct TServerName {
  1: required string hostName,
  2: optional i32 port,
}

struct THRegionLocation {
  1: required TServerName serverName,
  2: required THRegionInfo regionInfo,
}

struct TTableName {
  1: optional binary ns,
  2: required binary qualifier,
}

struct TColumnFamilyDescriptor {
  1: required binary name,
  3: optional map<string, string> configuration,
  4: optional i32 blockSize,
  5: optional TBloomFilterType bloomnFilterType,
  6: optional TCompressionAlgorithm compressionType,
  8: optional TDataBlockEncoding dataBlockEncoding,
  10: optional i32 maxVersions,
  13: optional i32 timeToLive,
  14: optional bool blockCacheEnabled,
  16: optional bool cacheDataOnWrite,
  20: optional bool inMemory,
}

struct TNamespaceDescriptor {
  1: required string name,
  2: optional map<string, string> configuration,
}

struct TTableDescriptor {
  1: required TTableName tableName,
  2: optional list<TColumnFamilyDescriptor> columns,
}

exception TIOError {
  1: optional string message,
  2: optional bool canRetry,
}

exception TIllegalArgument {
  1: optional string message,
}

service THBaseService {
  TResult get(1: required binary table, 2: required TGet tget) throws (1: TIOError io)
  list<TResult> getMultiple(1: required binary table, 2: required list<TGet> tgets)
    throws (1: TIOError io)
  void putMultiple(1: required binary table, 2: required list<TPut> tputs)
    throws (1: TIOError io)
  list<TDelete> deleteMultiple(1: required binary table, 2: required list<TDelete> tdeletes)
    throws (1: TIOError io)
  bool checkAndPut(1: required binary table, 2: required binary row, 3: required binary family,
                   4: required binary qualifier, 5: binary value, 6: required TPut tput)
    throws (1: TIOError io)
  list<TResult> getScannerResults(1: required binary table, 2: required TScan tscan,
                                  3: i32 numRows = 1) throws (1: TIOError io)
  list<THRegionLocation> getAllRegionLocations(1: required binary table)
    throws (1: TIOError io)
  void createTable(1: required TTableDescriptor desc, 2: optional list<binary> splitKeys)
    throws (1: TIOError io)
  TTableDescriptor getTableDescriptor(1: required TTableName table) throws (1: TIOError io)
  list<TTableName> getTableNamesByPattern(1: optional string regex,
                                          2: required bool includeSysTables)
    throws (1: TIOError io)
  void createNamespace(1: required TNamespaceDescriptor namespaceDesc) throws (1: TIOError io)
  TThriftServerType getThriftServerType()
}
