// Admin API calls Thrift lacks, for `scripts/hbase cluster admin` (hbase.d/cluster.sh) and
// the cluster fault tests (tests/test_cluster.py).  Run from source (JDK 11+), against the
// cluster's conf dir (ZooKeeper port) and the jars of scripts/hbase:
//
//   regions TABLE        one line per region: REGION encoded-name start-hex end-hex server
//   servers              one line per live region server: SERVER host,port,startcode
//   move TABLE           move every region of TABLE to the next live server (round robin),
//                        all at once
//   split TABLE          flush TABLE and split each of its regions at its midpoint
//   balance              run the balancer once
//
// Each waits until no region is in transition, then prints the table's regions.
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.ClusterMetrics;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.AsyncConnection;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.util.Bytes;

@SuppressWarnings("deprecation")
public class ClusterAdmin {
  private static final long TIMEOUT_MS = 300_000;

  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    try (Connection conn = ConnectionFactory.createConnection(conf);
        Admin admin = conn.getAdmin()) {
      switch (args[0]) {
        case "regions" -> regions(conn, TableName.valueOf(args[1]));
        case "servers" -> {
          for (ServerName server : servers(admin)) {
            System.out.println("SERVER " + server);
          }
        }
        case "move" -> {
          TableName table = TableName.valueOf(args[1]);
          List<ServerName> servers = servers(admin);
          List<CompletableFuture<Void>> moves = new ArrayList<>();
          try (AsyncConnection async = ConnectionFactory.createAsyncConnection(conf).get()) {
            for (HRegionLocation loc : locations(conn, table)) { // all at once
              int at = servers.indexOf(loc.getServerName());
              ServerName to = servers.get((at + 1) % servers.size());
              moves.add(async.getAdmin().move(loc.getRegion().getEncodedNameAsBytes(), to));
            }
            CompletableFuture.allOf(moves.toArray(new CompletableFuture[0])).get();
          }
          settle(admin);
          regions(conn, table);
        }
        case "split" -> {
          TableName table = TableName.valueOf(args[1]);
          int before = admin.getRegions(table).size();
          admin.flush(table);
          admin.split(table);
          long deadline = System.currentTimeMillis() + TIMEOUT_MS;
          while (admin.getRegions(table).size() <= before) {
            if (System.currentTimeMillis() > deadline) {
              throw new IllegalStateException("no region of " + table + " split");
            }
            Thread.sleep(200);
          }
          settle(admin);
          regions(conn, table);
        }
        case "balance" -> {
          admin.balancerSwitch(true, true);
          System.out.println("BALANCED " + admin.balance(true));
          settle(admin);
        }
        default -> throw new IllegalArgumentException("unknown command " + args[0]);
      }
    }
  }

  private static List<ServerName> servers(Admin admin) throws Exception {
    List<ServerName> servers = new ArrayList<>(admin.getRegionServers(true));
    servers.sort(null);
    return servers;
  }

  private static List<HRegionLocation> locations(Connection conn, TableName table)
      throws Exception {
    try (RegionLocator locator = conn.getRegionLocator(table)) {
      return locator.getAllRegionLocations();
    }
  }

  private static void regions(Connection conn, TableName table) throws Exception {
    try (RegionLocator locator = conn.getRegionLocator(table)) {
      locator.clearRegionLocationCache();
      for (HRegionLocation loc : locator.getAllRegionLocations()) {
        System.out.println(String.join(" ", "REGION", loc.getRegion().getEncodedName(),
            hex(loc.getRegion().getStartKey()), hex(loc.getRegion().getEndKey()),
            String.valueOf(loc.getServerName())));
      }
    }
  }

  private static String hex(byte[] key) {
    return key.length == 0 ? "-" : Bytes.toHex(key);
  }

  /** Wait until no region is in transition (moves and splits are procedures). */
  private static void settle(Admin admin) throws Exception {
    long deadline = System.currentTimeMillis() + TIMEOUT_MS;
    while (true) {
      ClusterMetrics metrics =
          admin.getClusterMetrics(EnumSet.of(ClusterMetrics.Option.REGIONS_IN_TRANSITION));
      if (metrics.getRegionStatesInTransition().isEmpty()) {
        return;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("regions still in transition: "
            + metrics.getRegionStatesInTransition());
      }
      Thread.sleep(200);
    }
  }
}
