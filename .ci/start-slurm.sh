#!/usr/bin/env bash
# Bring up (or stop, or inspect) a one-node Slurm cluster with fake GPUs for the Slurm backend tests.
#
#   .ci/start-slurm.sh [start]   install Debian's slurmctld/slurmd/slurm-client/munge when missing,
#                                write /etc/slurm/{slurm,gres}.conf, start munged + slurmctld + slurmd
#                                (no systemd), wait until sinfo shows the node idle
#   .ci/start-slurm.sh stop      cancel our jobs, stop the three daemons by their pid files
#   .ci/start-slurm.sh status    daemons, sinfo, squeue; exit 0 only when the node accepts jobs
#
# Safe to repeat: nothing is installed twice, and running daemons are restarted only when the
# generated configuration changed. Needs root (it installs packages and writes /etc/slurm).
#
# Environment: TESTDB_SLURM_GPUS (default 4) fake GPUs on the node, TESTDB_SLURM_CPUS (default
# max(nproc, GPUs)), TESTDB_SLURM_MEM_MB (default 4096), TESTDB_SLURM_WAIT_S (default 60).
#
# The GPUs are fake: gres.conf points at symlinks to /dev/null, which slurmd accepts as character
# devices, so jobs get CUDA_VISIBLE_DEVICES/SLURM_JOB_GPUS but nothing can run on a GPU.
set -euo pipefail

ACTION=${1:-start}
NODE=$(hostname -s)
GPUS=${TESTDB_SLURM_GPUS:-4}
CPUS=${TESTDB_SLURM_CPUS:-$(( $(nproc) > GPUS ? $(nproc) : GPUS ))}
MEM_MB=${TESTDB_SLURM_MEM_MB:-4096}
WAIT_S=${TESTDB_SLURM_WAIT_S:-60}
ETC=/etc/slurm
STATE=/run/testdb-slurm
MUNGE_PIDFILE=/run/munge/munged.pid
CTLD_PIDFILE=/run/slurmctld.pid
SLURMD_PIDFILE=/run/slurmd.pid
PACKAGES=(slurmctld slurmd slurm-client munge)

say() { printf '[start-slurm] %s\n' "$*"; }
fail() { printf '[start-slurm] error: %s\n' "$*" >&2; exit 1; }

# A pid file is trusted only while its process is alive, not a zombie, and has the expected
# name: pids get recycled, and we must never signal somebody else's process.
alive() {  # alive PIDFILE NAME
  local pid
  [ -s "$1" ] || return 1
  pid=$(<"$1")
  [ -r "/proc/$pid/comm" ] && [ "$(<"/proc/$pid/comm")" = "$2" ] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

halt() {  # halt PIDFILE NAME: SIGTERM, then SIGKILL after 10 s
  local pid n
  if ! alive "$1" "$2"; then rm -f "$1"; return 0; fi
  pid=$(<"$1")
  say "stopping $2 (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for n in $(seq 100); do alive "$1" "$2" || break; sleep 0.1; done
  if alive "$1" "$2"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.3; fi
  rm -f "$1"
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1; }

install_packages() {
  local missing=()
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || fail "missing ${missing[*]} and no apt-get to install them"
  say "installing ${missing[*]}"
  mkdir -p "$STATE"
  export DEBIAN_FRONTEND=noninteractive
  # Without --no-install-recommends apt pulls ~40 extra packages (hdf5, rrd, rocm-smi, ...).
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
           -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=120 "${missing[@]}"; } >"$STATE/apt.log" 2>&1; then
    tail -n 25 "$STATE/apt.log" >&2
    fail "apt-get failed (full log: $STATE/apt.log)"
  fi
}

CONFIG_CHANGED=0
put() {  # put PATH MODE < content: replace the file only when the content differs
  local tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; return 0; fi
  install -m "$2" "$tmp" "$1"
  rm -f "$tmp"
  CONFIG_CHANGED=1
  say "wrote $1"
}

configure() {
  local last=$((GPUS - 1)) files i
  getent hosts "$NODE" >/dev/null || echo "127.0.0.1 $NODE" >>/etc/hosts
  # Without systemd nothing creates the runtime directories the packages expect.
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge
  install -d -o munge -g munge -m 0711 /var/lib/munge
  install -d -o slurm -g slurm -m 0755 /var/lib/slurm /var/lib/slurm/slurmctld \
    /var/lib/slurm/slurmd /var/log/slurm
  install -d -m 0755 "$ETC" "$STATE/gpu"
  if [ ! -s /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key

  # slurmd insists that every gres File= is a character device; a regular file is accepted with
  # an error and jobs then get an empty CUDA_VISIBLE_DEVICES. /dev/null symlinks pass the check
  # without mknod and leave /dev alone, so nothing else mistakes them for real GPUs.
  for i in $(seq 0 "$last"); do ln -sfn /dev/null "$STATE/gpu/nvidia$i"; done
  for i in "$STATE"/gpu/nvidia*; do
    [ "${i##*nvidia}" -le "$last" ] 2>/dev/null || rm -f "$i"
  done
  if [ "$GPUS" -eq 1 ]; then files="$STATE/gpu/nvidia0"; else files="$STATE/gpu/nvidia[0-$last]"; fi

  put "$ETC/gres.conf" 0644 <<EOF
# written by testdb-audit .ci/start-slurm.sh: $GPUS fake GPUs, no NVML detection
AutoDetect=off
NodeName=$NODE Name=gpu File=$files
EOF

  put "$ETC/slurm.conf" 0644 <<EOF
# written by testdb-audit .ci/start-slurm.sh: one node on localhost with $GPUS fake GPUs
ClusterName=testdb
SlurmctldHost=$NODE(127.0.0.1)
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
GresTypes=gpu
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
SlurmctldPidFile=$CTLD_PIDFILE
SlurmdPidFile=$SLURMD_PIDFILE
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# No slurmdbd: plain sacct answers "accounting storage is disabled" and the backend falls back
# to scontrol, which keeps finished jobs for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
MinJobAge=3600
SchedulerType=sched/backfill
# The defaults delay each batch job by ~3 s; tests submit many tiny jobs.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a per-CPU default every job gets the whole node's memory and jobs run one at a time.
DefMemPerCPU=256
# Lets the node declare more CPUs than the machine has, so several GPU jobs can run at once.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
InactiveLimit=0
# Refuse at submission what could never run here instead of leaving it pending forever.
EnforcePartLimits=ALL
EOF
}

start_munge() {
  local n
  if alive "$MUNGE_PIDFILE" munged; then return 0; fi
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for n in $(seq 100); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "munged does not answer (see /var/log/munge/munged.log)"
}

start_slurm() {
  local n st resumes=0
  if [ "$CONFIG_CHANGED" = 1 ]; then
    halt "$SLURMD_PIDFILE" slurmd
    halt "$CTLD_PIDFILE" slurmctld
  fi
  # Both daemons fork into the background and write their own pid files.
  alive "$CTLD_PIDFILE" slurmctld || { say "starting slurmctld"; /usr/sbin/slurmctld; }
  alive "$SLURMD_PIDFILE" slurmd || { say "starting slurmd"; /usr/sbin/slurmd -N "$NODE"; }
  for n in $(seq $((WAIT_S * 5))); do
    st=$(node_state || true)
    case "$st" in
      idle | mixed | allocated | completing) say "node $NODE is $st"; return 0 ;;
      *drain* | down* | inval* | fail*)
        # A node marked down by an earlier run keeps that state across restarts until resumed.
        if [ $resumes -lt 3 ]; then
          scontrol update nodename="$NODE" state=resume 2>/dev/null || true
          resumes=$((resumes + 1))
        fi ;;
    esac
    sleep 0.2
  done
  tail -n 15 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  fail "node $NODE is not idle after ${WAIT_S} s (state: '$(node_state)')"
}

do_start() {
  [ "$(id -u)" = 0 ] || fail "needs root: it installs packages and writes /etc/slurm"
  install_packages
  configure
  start_munge
  start_slurm
  sinfo -N -o '%N %T %c %m %G'
}

do_stop() {
  local jobs n
  [ "$(id -u)" = 0 ] || fail "needs root"
  if alive "$CTLD_PIDFILE" slurmctld; then
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      say "cancelling jobs $jobs"
      # shellcheck disable=SC2086  # one argument per job id
      scancel $jobs 2>/dev/null || true
      for n in $(seq 50); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  halt "$SLURMD_PIDFILE" slurmd
  halt "$CTLD_PIDFILE" slurmctld
  halt "$MUNGE_PIDFILE" munged
}

do_status() {
  local ok=0 spec
  for spec in "$MUNGE_PIDFILE munged" "$CTLD_PIDFILE slurmctld" "$SLURMD_PIDFILE slurmd"; do
    set -- $spec
    if alive "$1" "$2"; then echo "$2: running (pid $(<"$1"))"; else echo "$2: stopped"; ok=1; fi
  done
  if alive "$CTLD_PIDFILE" slurmctld; then
    sinfo -N -o '%N %T %c %m %G %E' || ok=1
    squeue || true
    case "$(node_state)" in idle | mixed | allocated | completing) ;; *) ok=1 ;; esac
  fi
  return $ok
}

case "$ACTION" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  *) fail "usage: $0 [start|stop|status]" ;;
esac
