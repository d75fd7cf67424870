// Writes tests/data/hbase_filters.tsv: filters serialized by HBase itself (run once):
//   CP="$SHDB_HBASE_HOME/lib/*"; javac -cp "$CP" -d /tmp HBaseFilterFixtures.java
//   java -cp "$CP:/tmp" HBaseFilterFixtures > hbase_filters.tsv
import java.util.*;
import org.apache.hadoop.hbase.filter.*;
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter.RowRange;
import org.apache.hadoop.hbase.shaded.protobuf.ProtobufUtil;

public class HBaseFilterFixtures {
  static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }
  static byte[] h(String s) { byte[] b = new byte[s.length() / 2]; for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16); return b; }
  static void out(String name, Filter f) throws Exception { System.out.println(name + "\t" + hex(ProtobufUtil.toFilter(f).toByteArray())); }
  static MultiRowRangeFilter mrrf(String... se) { List<RowRange> r = new ArrayList<>(); for (int i = 0; i < se.length; i += 2) r.add(new RowRange(h(se[i]), true, h(se[i + 1]), false)); return new MultiRowRangeFilter(r); }
  public static void main(String[] a) throws Exception {
    out("key_only", new KeyOnlyFilter());
    out("key_only_len_as_val", new KeyOnlyFilter(true));
    out("mrrf_one", mrrf("1234560001", "1234560002"));
    out("mrrf_two", mrrf("0000000001", "0000000002", "fffffffc0a", "fffffffc0b"));
    out("mrrf_open_start", mrrf("", "10"));
    out("mrrf_open_stop", mrrf("f0", ""));
    StringBuilder many = new StringBuilder();
    List<String> se = new ArrayList<>();
    for (int i = 0; i < 200; i++) { se.add(String.format("%08x01", i * 1000003)); se.add(String.format("%08x02", i * 1000003)); }
    out("mrrf_200", mrrf(se.toArray(new String[0])));
    out("list_all_mrrf_keyonly", new FilterList(FilterList.Operator.MUST_PASS_ALL, mrrf("1234560001", "1234560002"), new KeyOnlyFilter()));
    out("list_one_keyonly", new FilterList(FilterList.Operator.MUST_PASS_ONE, new KeyOnlyFilter()));
    out("list_empty", new FilterList(FilterList.Operator.MUST_PASS_ALL));
    out("column_range_from", new ColumnRangeFilter(h("0123456789abcdef6964"), true, null, false));
    out("column_range_from_empty", new ColumnRangeFilter(new byte[0], true, null, false));
  }
}
