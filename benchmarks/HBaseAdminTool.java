// Admin operations the bench needs and HBase's Thrift1 gateway cannot do, for scripts/bench.
//
// * Thrift1 creates a column family without a data block encoding or a row-prefix
//   bloom filter, so the bench uses this to measure what the schema's intended
//   settings (FAST_DIFF, ROWPREFIX_FIXED_LENGTH) would store and how fast they query.
// * Thrift1's majorCompact (happybase compact_table(major=True)) runs a *minor*
//   compaction in HBase 2.6.1: ThriftHBaseServiceHandler.majorCompact calls
//   Admin.compactRegion / Admin.compact. A store with one HFile is then left alone.
//
// Compiled once by scripts/bench (javac) against the jars scripts/hbase downloaded:
//
//   java -cp "$SHDB_HBASE_HOME/conf:$SHDB_HBASE_HOME/lib/*:CLASSES" HBaseAdminTool CMD ARGS
//     flush TABLE...                      flush the memstores to HFiles
//     compact TABLE...                    major-compact, wait until done
//     encode ENCODING TABLE:FAMILY[:BLOOM[:PREFIX_LENGTH]]...
//                                         set the family's encoding (and bloom filter),
//                                         major-compact, wait
//
// The client finds the cluster through hbase-site.xml (ZooKeeper port) in the conf dir.
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.util.Bytes;

public class HBaseAdminTool {
  private static final long TIMEOUT_MS = 600_000;

  public static void main(String[] args) throws Exception {
    try (Connection conn = ConnectionFactory.createConnection(HBaseConfiguration.create());
        Admin admin = conn.getAdmin()) {
      switch (args[0]) {
        case "flush" -> {
          for (TableName table : tables(args, 1)) {
            admin.flush(table);
            System.out.println("flushed " + table);
          }
        }
        case "compact" -> compact(admin, tables(args, 1));
        case "encode" -> {
          DataBlockEncoding encoding = DataBlockEncoding.valueOf(args[1]);
          for (int i = 2; i < args.length; i++) {
            encode(admin, args[i].split(":"), encoding);
          }
          compact(admin, tables(args, 2));
        }
        default -> throw new IllegalArgumentException("unknown command " + args[0]);
      }
    }
  }

  /** Table names from args[from..], each optionally followed by ":family". */
  private static List<TableName> tables(String[] args, int from) {
    List<TableName> out = new ArrayList<>();
    for (int i = from; i < args.length; i++) {
      out.add(TableName.valueOf(args[i].split(":", 2)[0]));
    }
    return out;
  }

  /** spec: TABLE, FAMILY[, BLOOM[, PREFIX_LENGTH]] (the schema's bloom settings). */
  private static void encode(Admin admin, String[] spec, DataBlockEncoding enc) throws Exception {
    TableName table = TableName.valueOf(spec[0]);
    ColumnFamilyDescriptor old = admin.getDescriptor(table).getColumnFamily(Bytes.toBytes(spec[1]));
    ColumnFamilyDescriptorBuilder family =
        ColumnFamilyDescriptorBuilder.newBuilder(old).setDataBlockEncoding(enc);
    if (spec.length > 2) {
      family.setBloomFilterType(BloomType.valueOf(spec[2]));
    }
    if (spec.length > 3) {
      family.setConfiguration("RowPrefixBloomFilter.prefix_length", spec[3]);
    }
    admin.modifyColumnFamily(table, family.build());
    System.out.println("altered " + String.join(":", spec) + " encoding " + enc);
  }

  /** Major-compact every table, then wait until no compaction runs on any of them. */
  private static void compact(Admin admin, List<TableName> tables) throws Exception {
    for (TableName table : tables) {
      admin.majorCompact(table);
    }
    long deadline = System.currentTimeMillis() + TIMEOUT_MS;
    TimeUnit.SECONDS.sleep(2); // requests are queued asynchronously
    for (TableName table : tables) {
      while (admin.getCompactionState(table) != CompactionState.NONE) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("compaction of " + table + " did not finish");
        }
        TimeUnit.MILLISECONDS.sleep(500);
      }
      System.out.println("compacted " + table);
    }
  }
}
