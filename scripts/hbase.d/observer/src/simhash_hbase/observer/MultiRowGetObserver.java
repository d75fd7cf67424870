package simhash_hbase.observer;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.NotServingRegionException;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.coprocessor.ObserverContext;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.coprocessor.RegionObserver;
import org.apache.hadoop.hbase.filter.ColumnRangeFilter;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.util.Bytes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Several rows in one single-row Get (simhash-hbase, docs/hbase.md "Multi-row reads").
 *
 * <p>A Get that carries the attribute {@code shdb.rows} is answered with the cells of the
 * rows that attribute lists instead of its own row's: the HBase client sends a one-row get
 * straight to the region server, a multi-row get through its thread pool, which costs a
 * query most of its time on a Thrift gateway. Only rows of the same table in regions online
 * on this region server are read, each by an ordinary {@link Region#get} (so the other
 * coprocessors, access control included, see every read); rows elsewhere are named back to
 * the client, which reads them itself. Gets without the attribute are left alone.
 *
 * <p>Request (the attribute's value, big-endian): version byte 1, int32 columns per row
 * (a storeLimit; 0: all), then up to 65,535 entries, each: u8 key length, key, u16 length
 * of the first qualifier wanted, that qualifier (empty: from the row's first). Reply cells,
 * all on the Get's row, in this order: a marker (qualifier {@code \0shdb-multiget-v1},
 * value: the entries not read here, u16 index each), then each entry's cells in order, with
 * qualifier = u16 entry index + the cell's own qualifier (family, timestamp and value
 * unchanged). An entry's cells are those a Get of its row with that storeLimit and a
 * ColumnRangeFilter from its qualifier reads.
 */
public class MultiRowGetObserver implements RegionCoprocessor, RegionObserver {
  public static final String ATTRIBUTE = "shdb.rows";
  public static final byte VERSION = 1;
  static final byte[] MARKER = Bytes.toBytes("\0shdb-multiget-v1");
  /** At DEBUG, one line per multi-row get (the cluster tests count them per server). */
  private static final Logger LOG = LoggerFactory.getLogger(MultiRowGetObserver.class);

  @Override
  public Optional<RegionObserver> getRegionObserver() {
    return Optional.of(this);
  }

  @Override
  public void preGetOp(ObserverContext<RegionCoprocessorEnvironment> c, Get get, List<Cell> result)
      throws IOException {
    byte[] request = get.getAttribute(ATTRIBUTE);
    if (request == null || request.length == 0 || request[0] != VERSION) {
      return; // an ordinary get, or a request of a version this observer does not know
    }
    RegionCoprocessorEnvironment env = c.getEnvironment();
    Region home = env.getRegion();
    TableName table = home.getRegionInfo().getTable();
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(request, 1, request.length - 1));
    ByteArrayOutputStream missing = new ByteArrayOutputStream();
    List<Cell> cells = new ArrayList<>();
    List<? extends Region> others = null;
    byte[] anchor = get.getRow();
    try {
      int columns = in.readInt();
      for (int index = 0; in.available() > 0; index++) {
        if (index > 0xFFFF) {
          throw new DoNotRetryIOException(ATTRIBUTE + ": more than 65,535 rows");
        }
        byte[] key = new byte[in.readUnsignedByte()];
        in.readFully(key);
        byte[] start = new byte[in.readUnsignedShort()];
        in.readFully(start);
        if (key.length == 0) {
          throw new DoNotRetryIOException(ATTRIBUTE + ": an empty row key");
        }
        Region region = home;
        if (!home.getRegionInfo().containsRow(key)) {
          if (others == null) { // the table's other regions on this server, listed once
            others = env.getOnlineRegions().getRegions(table);
          }
          region = regionOf(others, key);
        }
        List<Cell> row = region == null ? null : read(region, key, start, columns);
        if (row == null) {
          missing.write(index >> 8);
          missing.write(index);
          continue;
        }
        for (Cell cell : row) {
          cells.add(rekeyed(anchor, index, cell));
        }
      }
    } catch (EOFException e) {
      throw new DoNotRetryIOException(ATTRIBUTE + ": a truncated request", e);
    }
    byte[] family = home.getTableDescriptor().getColumnFamilies()[0].getName();
    if (LOG.isDebugEnabled()) {
      LOG.debug("shdb.rows get of {} in {}: {} rows not here", Bytes.toStringBinary(anchor),
          table, missing.size() / 2);
    }
    result.add(new KeyValue(anchor, family, MARKER, 0L, KeyValue.Type.Put, missing.toByteArray()));
    result.addAll(cells);
    c.bypass();
  }

  /** The region among {@code regions} that holds {@code key} (null: none does). */
  private static Region regionOf(List<? extends Region> regions, byte[] key) {
    for (Region region : regions) {
      RegionInfo info = region.getRegionInfo();
      if (info.getReplicaId() == RegionInfo.DEFAULT_REPLICA_ID && info.containsRow(key)) {
        return region;
      }
    }
    return null;
  }

  /** Row {@code key}'s cells, as a Get of it with storeLimit and a column range would read
   * them (null: the region closed meanwhile; the client reads the row itself). */
  private static List<Cell> read(Region region, byte[] key, byte[] start, int columns)
      throws IOException {
    Get get = new Get(key);
    if (columns > 0) {
      get.setMaxResultsPerColumnFamily(columns);
    }
    if (start.length > 0) {
      get.setFilter(new ColumnRangeFilter(start, true, null, false));
    }
    try {
      return region.get(get, true);
    } catch (NotServingRegionException e) {
      return null;
    }
  }

  /** {@code cell} on the anchor row, its qualifier prefixed with the entry's index. */
  private static Cell rekeyed(byte[] anchor, int index, Cell cell) {
    int qlen = cell.getQualifierLength();
    byte[] qualifier = new byte[2 + qlen];
    qualifier[0] = (byte) (index >> 8);
    qualifier[1] = (byte) index;
    System.arraycopy(cell.getQualifierArray(), cell.getQualifierOffset(), qualifier, 2, qlen);
    return new KeyValue(anchor, CellUtil.cloneFamily(cell), qualifier, cell.getTimestamp(),
        KeyValue.Type.Put, CellUtil.cloneValue(cell));
  }
}
