#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine, for trying the Slurm
# executor and for the suite (docs/cluster.md): munged, a MariaDB server for
# the accounting database, slurmdbd, slurmctld and slurmd, each started in
# the background by this script (no systemd), everything under DIR (default
# /tmp/millrace-slurm), the daemons bound to 127.0.0.1. Debian's packages
# (slurm-wlm, slurmdbd, mariadb-server, munge, and Open MPI, which must be
# there before slurmd starts or `srun --mpi=pmix` hangs) come from
# scripts/install-deps.sh.
#
# usage: eval "$(scripts/start-slurm.sh [DIR])"   then sbatch, squeue, sacct ...
#        scripts/stop-slurm.sh [DIR]
#
# Every start is from a clean state: the spool, the controller's state and
# the accounting database are wiped together (job ids would collide
# otherwise). Prints `export SLURM_CONF=DIR/etc/slurm.conf` (clients need it:
# without it they try a configless DNS lookup) and leaves it in DIR/slurm.env;
# the pids in DIR/pids/, the logs in DIR/log/. Returns once the node is idle
# (at most 60 s).
#
# Tuned for tests: a job's credential expires after 5 s (a requeued job waits
# for it: 122 s by default) and the scheduler runs every second.
set -euo pipefail
dir=${1:-${MILLRACE_SLURM_DIR:-/tmp/millrace-slurm}}
for b in munged mariadbd mariadb-install-db mariadb slurmdbd slurmctld slurmd sinfo sacctmgr mpirun; do
    command -v "$b" >/dev/null || { echo "$0: $b is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
if [ -d "$dir/pids" ]; then
    for p in "$dir"/pids/*.pid; do
        [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null &&
            { echo "$0: a cluster already runs from $dir (scripts/stop-slurm.sh $dir)" >&2; exit 1; }
    done
fi
rm -rf "$dir"
mkdir -p "$dir"/{etc,munge,mysql,state,spool,pids,log,run}
dir=$(cd "$dir" && pwd)
chmod 755 "$dir"

# free TCP ports on 127.0.0.1: MariaDB, slurmdbd, slurmctld, slurmd
read -r p_db p_dbd p_ctld p_d <<<"$(python3 - <<'PY'
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss:
    s.close()
PY
)"

fail() {
    echo "$0: $1 (see $dir/log/)" >&2
    "$(dirname "$0")/stop-slurm.sh" "$dir" >/dev/null 2>&1 || true
    exit 1
}
wait_for() { # WHAT SECONDS CMD...
    local what=$1 n=$(( $2 * 10 ))
    shift 2
    for _ in $(seq "$n"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "$what did not come up"
}

# munge: a fresh key, its own socket
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
# the clients (sacct, sacctmgr, sbatch) find munged at its default socket only
sock=/run/munge/munge.socket.2
mkdir -p /run/munge
if [ -S "$sock" ] && pgrep -x munged >/dev/null; then
    echo "$0: a munged already serves $sock (stop it, or use that cluster)" >&2
    exit 1
fi
rm -f "$sock" "$sock.lock"
munged --force --key-file="$dir/munge/munge.key" --socket="$sock" --pid-file="$dir/pids/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munge.seed" || fail "munged did not start"
wait_for munged 10 test -S "$sock"

# MariaDB for the accounting database, on 127.0.0.1 only
mariadb-install-db --no-defaults --datadir="$dir/mysql" --user=root --auth-root-authentication-method=socket \
    --skip-test-db >"$dir/log/mariadb-install.log" 2>&1 || fail "mariadb-install-db failed"
mariadbd --no-defaults --datadir="$dir/mysql" --user=root --bind-address=127.0.0.1 --port="$p_db" \
    --socket="$dir/run/mysqld.sock" --pid-file="$dir/pids/mariadbd.pid" --log-error="$dir/log/mariadbd.log" \
    --innodb-buffer-pool-size=32M --skip-name-resolve >/dev/null 2>&1 &
wait_for MariaDB 30 mariadb --no-defaults -S "$dir/run/mysqld.sock" -u root -e "SELECT 1"
dbpass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
mariadb --no-defaults -S "$dir/run/mysqld.sock" -u root -e "
    CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$dbpass';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || fail "cannot create the accounting user"

host=localhost
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
cat >"$dir/etc/slurm.conf" <<EOF
# written by scripts/start-slurm.sh: a one-node cluster for millrace's tests
ClusterName=millrace
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p_ctld
SlurmdPort=$p_d
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
AuthInfo=socket=$sock,cred_expire=5
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/pids/slurmctld.pid
SlurmdPidFile=$dir/pids/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1,batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$p_dbd
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat >"$dir/etc/slurmdbd.conf" <<EOF
# written by scripts/start-slurm.sh
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$p_dbd
CommunicationParameters=NoInAddrAny
SlurmUser=root
PidFile=$dir/pids/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$p_db
StorageUser=slurm
StoragePass=$dbpass
StorageLoc=slurm_acct_db
EOF
chmod 600 "$dir/etc/slurmdbd.conf"
export SLURM_CONF="$dir/etc/slurm.conf"
# slurmdbd reads slurmdbd.conf next to slurm.conf
slurmdbd >/dev/null 2>&1 || fail "slurmdbd did not start"
wait_for slurmdbd 30 sacctmgr -n show cluster
sacctmgr -i add cluster millrace >/dev/null 2>&1 || true
slurmctld >/dev/null 2>&1 || fail "slurmctld did not start"
wait_for slurmctld 30 scontrol ping
slurmd -N "$host" >/dev/null 2>&1 || fail "slurmd did not start"
idle() { [ "$(sinfo -h -N -o %T | head -1)" = idle ]; }
wait_for "the node" 60 idle
echo "export SLURM_CONF=$dir/etc/slurm.conf" >"$dir/slurm.env"
cat "$dir/slurm.env"
