# shellcheck shell=bash
# `scripts/hbase cluster ...`: a real multi-server HBase on one machine, sourced by
# scripts/hbase (whose jars, observer, launch/terminate helpers and probe it uses).
#
#   scripts/hbase cluster start [--fresh] [--timeout S]   ZooKeeper, HMaster, N region
#                                                         servers, Thrift1 + Thrift2; wait
#   scripts/hbase cluster stop                            clean cluster shutdown
#   scripts/hbase cluster status                          exit 0 if every process runs
#   scripts/hbase cluster kill                            SIGKILL every process
#   scripts/hbase cluster kill-rs N                       SIGKILL region server N (1..N)
#   scripts/hbase cluster start-rs N                      start region server N again
#   scripts/hbase cluster admin CMD ARGS...               hbase.d/ClusterAdmin.java: regions,
#                                                         move, split, balance (its header)
#   scripts/hbase cluster run ROLE                        one JVM in the foreground: zookeeper,
#                                                         master, regionserver N, thrift or
#                                                         thrift2 (the image's cluster mode)
#
# Every JVM is its own process (hbase.cluster.distributed=true) on 127.0.0.1, and all
# share one rootdir on the local filesystem (hbase-cluster-site.xml.in says why that
# works).  Ports (B = SHDB_HBASE_CLUSTER_BASE_PORT [17100]): ZooKeeper
# SHDB_HBASE_CLUSTER_ZK_PORT [3181]; master B (RPC), B+10 (web UI); region server n
# B+10+10n (RPC), B+15+10n (web UI): 17120/17125, 17130/17135, 17140/17145; Thrift1
# SHDB_HBASE_CLUSTER_THRIFT_PORT [9790], Thrift2 the next port [9791].
# Other settings: SHDB_HBASE_CLUSTER_DIR (conf, logs, pids, data) [$SHDB_HBASE_HOME/cluster],
# SHDB_HBASE_CLUSTER_SERVERS [3] (at most 5), SHDB_HBASE_RS_HEAP [448m],
# SHDB_HBASE_MASTER_HEAP [384m here], SHDB_HBASE_THRIFT_HEAP [320m here],
# SHDB_HBASE_CLUSTER_JVM_FLAGS, added to every JVM's [-XX:TieredStopAtLevel=1: the quick
# JIT only, so that seven JVMs starting on two cores do not spend them compiling].

CLUSTER_ROLES=()  # every role, in start order (set by cluster_init)
CLUSTER_JVM=()  # extra JVM flags of every role

cluster_init() {
  CLUSTER_DIR=${SHDB_HBASE_CLUSTER_DIR:-$HB_HOME/cluster}
  mkdir -p "$CLUSTER_DIR"
  CLUSTER_DIR=$(cd "$CLUSTER_DIR" && pwd)
  CONF_DIR="$CLUSTER_DIR/conf"
  LOG_DIR="$CLUSTER_DIR/logs"
  RUN_DIR="$CLUSTER_DIR/run"
  DATA_DIR="$CLUSTER_DIR/data"
  mkdir -p "$CONF_DIR" "$LOG_DIR" "$RUN_DIR" "$DATA_DIR"
  ZK_PORT=${SHDB_HBASE_CLUSTER_ZK_PORT:-3181}
  THRIFT_PORT=${SHDB_HBASE_CLUSTER_THRIFT_PORT:-9790}
  THRIFT2_PORT=$((THRIFT_PORT + 1))
  BASE_PORT=${SHDB_HBASE_CLUSTER_BASE_PORT:-17100}
  SERVERS=${SHDB_HBASE_CLUSTER_SERVERS:-3}
  RS_HEAP=${SHDB_HBASE_RS_HEAP:-448m}
  MASTER_HEAP=${SHDB_HBASE_MASTER_HEAP:-384m}
  THRIFT_HEAP=${SHDB_HBASE_THRIFT_HEAP:-320m}
  read -r -a CLUSTER_JVM <<<"${SHDB_HBASE_CLUSTER_JVM_FLAGS--XX:TieredStopAtLevel=1}"
  local v
  for v in ZK_PORT THRIFT_PORT BASE_PORT SERVERS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "cluster: $v must be a number, not '${!v}'"
  done
  ((SERVERS >= 1 && SERVERS <= 5)) || die "cluster: SHDB_HBASE_CLUSTER_SERVERS must be 1..5"
  CLUSTER_ROLES=(cluster-zk cluster-master)
  local n
  for ((n = 1; n <= SERVERS; n++)); do CLUSTER_ROLES+=("cluster-rs$n"); done
  CLUSTER_ROLES+=(cluster-thrift cluster-thrift2)
}

rs_port() { echo $((BASE_PORT + 10 + 10 * $1)); }
rs_info_port() { echo $((BASE_PORT + 15 + 10 * $1)); }

cluster_render_conf() {
  local esc_data site log4j
  esc_data=$(printf '%s' "$DATA_DIR" | sed -e 's/[\\|&]/\\&/g')
  # Written aside (a name of its own: every container's shell is pid 1) and renamed: the
  # containers of the image's cluster mode render the same files into the shared dir as
  # each starts, and a JVM must never read half a file.
  site=$(mktemp "$CONF_DIR/.hbase-site.xml.XXXXXX")
  log4j=$(mktemp "$CONF_DIR/.log4j2.properties.XXXXXX")
  chmod 644 "$site" "$log4j"
  sed -e "s|@DATA@|$esc_data|g" -e "s|@ZK_PORT@|$ZK_PORT|g" \
    -e "s|@THRIFT_PORT@|$THRIFT_PORT|g" -e "s|@THRIFT_READ_TIMEOUT_MS@|$THRIFT_READ_TIMEOUT_MS|g" \
    -e "s|@MASTER_PORT@|$BASE_PORT|g" -e "s|@MASTER_INFO_PORT@|$((BASE_PORT + 10))|g" \
    -e "s|@OBSERVER@|$(observer_property)|g" \
    "$ASSETS/hbase-cluster-site.xml.in" >"$site"
  mv -f "$site" "$CONF_DIR/hbase-site.xml"
  # The observer logs each multi-row get at DEBUG: the tests count its calls per server.
  {
    cat "$ASSETS/log4j2.properties"
    printf '%s\n' 'logger.observer.name = simhash_hbase.observer' 'logger.observer.level = DEBUG'
  } >"$log4j"
  mv -f "$log4j" "$CONF_DIR/log4j2.properties"
}

# The JVM of a role (cluster-zk, cluster-master, cluster-rsN, cluster-thrift,
# cluster-thrift2): sets ROLE_HEAP, and ROLE_ARGV (its own JVM flags, main class and
# arguments; each region server's ports on its command line, as generic -D options).
# One definition for both launchers: `cluster start` (background JVMs on this machine)
# and `cluster run` (one in the foreground: a container of the image's cluster mode).
cluster_role() {
  local role=$1
  case "$role" in
    cluster-zk)
      ROLE_HEAP=128m
      ROLE_ARGV=(-Dzookeeper.admin.enableServer=false org.apache.hadoop.hbase.zookeeper.HQuorumPeer) ;;
    cluster-master)
      ROLE_HEAP=$MASTER_HEAP
      ROLE_ARGV=(org.apache.hadoop.hbase.master.HMaster start) ;;
    cluster-rs*)
      local n=${role#cluster-rs}
      ROLE_HEAP=$RS_HEAP
      ROLE_ARGV=(org.apache.hadoop.hbase.regionserver.HRegionServer
        -D "hbase.regionserver.port=$(rs_port "$n")"
        -D "hbase.regionserver.info.port=$(rs_info_port "$n")" start) ;;
    cluster-thrift)
      ROLE_HEAP=$THRIFT_HEAP
      ROLE_ARGV=(org.apache.hadoop.hbase.thrift.ThriftServer -threadpool -b 127.0.0.1 -p "$THRIFT_PORT" start) ;;
    cluster-thrift2)
      ROLE_HEAP=$THRIFT_HEAP
      ROLE_ARGV=(org.apache.hadoop.hbase.thrift2.ThriftServer -threadpool -b 127.0.0.1 -p "$THRIFT2_PORT" start) ;;
    *) die "cluster: unknown role '$role'" ;;
  esac
  ROLE_ARGV=("${CLUSTER_JVM[@]}" "${ROLE_ARGV[@]}")
}

cluster_launch() {
  cluster_role "$1"
  launch "$1" "$ROLE_HEAP" "${ROLE_ARGV[@]}"
}

cluster_start_rs() {
  reset_logs "cluster-rs$1"
  cluster_launch "cluster-rs$1"
}

# Wait until region server n told the master it serves (its log says "Serving as").
cluster_wait_rs() {
  local n=$1 timeout=$2 t0=$SECONDS
  until grep -qs 'Serving as ' "$LOG_DIR/cluster-rs$n.log"; do
    is_running "cluster-rs$n" || { print_logs "cluster-rs$n.out" "cluster-rs$n.log"; die "region server $n exited"; }
    ((SECONDS - t0 < timeout)) || { print_logs "cluster-rs$n.log"; die "region server $n did not check in within ${timeout}s"; }
    sleep 1
  done
}

cluster_any_running() {
  local role
  for role in "${CLUSTER_ROLES[@]}"; do is_running "$role" && return 0; done
  return 1
}

# One cluster command at a time per cluster dir.  Jars and observer are fetched under
# scripts/hbase's own lock (shared with the standalone instance), released before the
# start so that a standalone start beside it (scripts/test's passes) never waits on it.
cluster_lock() {
  command -v flock >/dev/null 2>&1 || return 0
  exec 8>"$CLUSTER_DIR/.lock"
  flock -w 900 8 || die "another scripts/hbase cluster command holds $CLUSTER_DIR/.lock"
}

cluster_start() {
  cluster_lock
  take_lock
  ensure_probe_deps
  check_java
  fetch_jars
  build_observer
  exec 9>&-
  cluster_any_running && die "cluster: already (partly) running; see: scripts/hbase cluster status"
  if [[ "$FRESH" == 1 ]]; then
    log "cluster: wiping $DATA_DIR"
    rm -rf "$DATA_DIR"
    mkdir -p "$DATA_DIR"
  fi
  local n p
  for p in "$ZK_PORT" "$THRIFT_PORT" "$THRIFT2_PORT" "$BASE_PORT" "$((BASE_PORT + 10))"; do
    require_free_port "$p" "HBase cluster" SHDB_HBASE_CLUSTER_BASE_PORT
  done
  for ((n = 1; n <= SERVERS; n++)); do
    require_free_port "$(rs_port "$n")" "region server $n" SHDB_HBASE_CLUSTER_BASE_PORT
  done
  cluster_render_conf
  local t0=$SECONDS role
  for role in "${CLUSTER_ROLES[@]}"; do reset_logs "$role"; done
  log "cluster: starting ZooKeeper on 127.0.0.1:$ZK_PORT (data in $DATA_DIR)"
  cluster_launch cluster-zk
  until port_open "$ZK_PORT"; do
    is_running cluster-zk || cluster_fail "ZooKeeper exited"
    ((SECONDS - t0 < 60)) || cluster_fail "ZooKeeper did not open port $ZK_PORT"
    sleep 0.5
  done
  log "cluster: starting HMaster on $BASE_PORT and $SERVERS region servers"
  cluster_launch cluster-master
  for ((n = 1; n <= SERVERS; n++)); do cluster_launch "cluster-rs$n"; done
  cluster_launch cluster-thrift
  cluster_launch cluster-thrift2
  for ((n = 1; n <= SERVERS; n++)); do
    (cluster_wait_rs "$n" "$WAIT_TIMEOUT") || cluster_fail "region server $n did not start"
  done
  cluster_wait_ready || cluster_fail "not ready"
  log "cluster: ready after $((SECONDS - t0))s: thrift1 127.0.0.1:$THRIFT_PORT, thrift2 127.0.0.1:$THRIFT2_PORT, $SERVERS region servers (logs: $LOG_DIR)"
}

cluster_wait_ready() {
  local t0=$SECONDS out=""
  until out=$(probe_once); do
    is_running cluster-master || { log "cluster: HMaster exited"; return 1; }
    if ((SECONDS - t0 >= WAIT_TIMEOUT)); then
      log "cluster: not ready after ${WAIT_TIMEOUT}s; last probe said: ${out##*$'\n'}"
      return 1
    fi
    sleep 2
  done
}

cluster_fail() {
  log "cluster: error: $*"
  print_logs cluster-zk.log cluster-master.out cluster-master.log cluster-rs1.log \
    cluster-thrift.log cluster-thrift2.log
  cluster_kill_all
  exit 1
}

cluster_kill_role() {
  local role=$1 pid
  pid=$(role_pid "$role") || return 0
  kill -KILL "$pid" 2>/dev/null || true
  wait_exit 10 "$pid" || die "could not kill $role (pid $pid)"
  rm -f "$(pid_file "$role")"
  log "killed $role (pid $pid)"
}

cluster_kill_all() {
  local i
  for ((i = ${#CLUSTER_ROLES[@]} - 1; i >= 0; i--)); do cluster_kill_role "${CLUSTER_ROLES[i]}"; done
}

# Gateways first, then a cluster shutdown (the master tells every region server to
# flush and stop, as stop-hbase.sh does), then ZooKeeper.
cluster_stop() {
  cluster_lock
  cluster_any_running || { log "cluster: not running"; return 0; }
  terminate cluster-thrift2 15
  terminate cluster-thrift 15
  if is_running cluster-master; then
    log "cluster: stopping (cluster shutdown, flushes memstores)"
    local java
    java=$(java_bin)
    local -a opts
    mapfile -t opts < <(jvm_opts cluster-stopper 256m)
    timeout "$STOP_TIMEOUT" "$java" "${opts[@]}" -Dhbase.client.retries.number=3 \
      org.apache.hadoop.hbase.master.HMaster stop --shutDownCluster \
      >"$LOG_DIR/cluster-stopper.out" 2>&1 || log "cluster: shutdown request failed; SIGTERM"
  fi
  local role pid
  for role in "${CLUSTER_ROLES[@]}"; do
    [[ $role == cluster-zk ]] && continue
    pid=$(role_pid "$role") || continue
    wait_exit "$STOP_TIMEOUT" "$pid" || true
    terminate "$role" 20
  done
  terminate cluster-zk 20
  rm -f "$RUN_DIR"/cluster-*.pid
  log "cluster: stopped"
}

cluster_status() {
  local role pid rc=0 line=""
  for role in "${CLUSTER_ROLES[@]}"; do
    if pid=$(role_pid "$role"); then line+=" ${role#cluster-}=$pid"; else line+=" ${role#cluster-}=down"; rc=1; fi
  done
  echo "cluster:$line (thrift1 127.0.0.1:$THRIFT_PORT, thrift2 :$THRIFT2_PORT, ZooKeeper :$ZK_PORT, dir $CLUSTER_DIR)"
  return "$rc"
}

cluster_rs_arg() {
  [[ ${1:-} =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= SERVERS)) || die "cluster: a region server number 1..$SERVERS, not '${1:-}'"
}

# The Admin API calls Thrift lacks (hbase.d/ClusterAdmin.java), compiled once per source
# content into $SHDB_HBASE_HOME beside the jars (javac, as the observer): not into the
# cluster dir, which the tests' clusters of containers make afresh each session.
cluster_admin() {
  local java src="$ASSETS/ClusterAdmin.java" out="$HB_HOME/admin" sum
  java=$(java_bin)
  sum=$(sha256sum "$src" | cut -d' ' -f1)
  if [[ "$(cat "$out/.sha256" 2>/dev/null)" != "$sum" ]]; then
    rm -rf "$out.$$"
    mkdir -p "$out.$$"
    "$(jdk_tool javac)" --release 17 -nowarn -cp "$LIB_DIR/*" -d "$out.$$" "$src" >&2 ||
      die "javac failed to build $src"
    echo "$sum" >"$out.$$/.sha256"
    rm -rf "$out"
    mv -T "$out.$$" "$out" 2>/dev/null || rm -rf "$out.$$"  # or another's, just made
  fi
  local -a opts
  mapfile -t opts < <(jvm_opts cluster-admin 256m)
  "$java" "${opts[@]}" -cp "$CONF_DIR:$LIB_DIR/*:$out" ClusterAdmin "$@"
}

# One role in the foreground, in place of this shell: what each container of the
# image's cluster mode runs (docker/entrypoint cluster ROLE).  Every container renders
# the same conf into the shared cluster dir, mounted at the same path in each.
cluster_run() {
  local role
  case "${1:-}" in
    zookeeper) role=cluster-zk ;;
    master | thrift | thrift2) role=cluster-$1 ;;
    regionserver) cluster_rs_arg "${2:-}"; role=cluster-rs$2 ;;
    *) die "cluster run: a role: zookeeper, master, regionserver N, thrift or thrift2 (not '${1:-}')" ;;
  esac
  cluster_render_conf
  reset_logs "$role"
  cluster_role "$role"
  local -a opts
  mapfile -t opts < <(jvm_opts "$role" "$ROLE_HEAP")
  log "cluster: $role in the foreground (log: $LOG_DIR/$role.log)"
  exec "$(java_bin)" "${opts[@]}" "${ROLE_ARGV[@]}"
}

cluster_main() {
  local cmd=${1:-}
  [[ -n $cmd ]] || { usage >&2; exit 2; }
  shift
  [[ $cmd == admin || $cmd == run ]] || while (($#)); do
    case "$1" in
      --fresh) FRESH=1; shift ;;
      --timeout) [[ $# -ge 2 ]] || die "--timeout needs seconds"; WAIT_TIMEOUT=$2; shift 2 ;;
      [0-9]*) break ;;
      *) die "cluster: unknown option: $1 (see scripts/hbase --help)" ;;
    esac
  done
  init_paths
  cluster_init
  case "$cmd" in
    start) cluster_start ;;
    stop) cluster_stop ;;
    status) cluster_status ;;
    kill) cluster_lock; cluster_kill_all ;;
    kill-rs) cluster_rs_arg "${1:-}"; cluster_kill_role "cluster-rs$1" ;;
    start-rs)
      cluster_rs_arg "${1:-}"
      is_running "cluster-rs$1" && die "cluster: region server $1 is running"
      check_java
      cluster_start_rs "$1"
      cluster_wait_rs "$1" "$WAIT_TIMEOUT"
      log "cluster: region server $1 serving on $(rs_port "$1")"
      ;;
    admin) cluster_admin "$@" ;;
    run) cluster_run "$@" ;;
    *) die "cluster: unknown command '$cmd' (start, stop, status, kill, kill-rs N, start-rs N, admin, run)" ;;
  esac
}
