#!/usr/bin/env bash
# The reproduction grid on a batch system: stands up a one-node Slurm on this machine from
# Debian's packages (munged, slurmctld, slurmd, all with their keys, config, state and logs in
# one temporary directory, on free ports, so a system Slurm is left alone), submits
# `pagoda reproduce plan` as a job array (one task per cell and seed:
# `pagoda reproduce cell ID --out DIR`), waits for it, then runs `pagoda reproduce report DIR`.
#
#   scripts/slurm-reproduce.sh [--experiment NAME|all] [--scale quick|standard|full|tiny]
#       [--repeats N] [--seed N] [--parallel N] [--out DIR] [--pagoda PATH] [--timeout MIN]
#
#   --experiment  face | dwb-ftl | pipelined-commit | atomic-write | buffer-sweep | all (default)
#   --scale       the plan's scale (default quick; tiny is the test suite's seconds-long scale)
#   --parallel    array tasks run at once (default 1, the measured setting: concurrent cells
#                 share the CPU; each cell records the count and the report says so)
#   --out         where the cells, index.md and report.json go (default target/slurm-reproduce)
#   --pagoda      a built binary (default: cargo build --release)
#   --timeout     minutes to wait for the array (default: 4x the plan's estimate + 10)
#
# Needs root (it starts the daemons); installs slurm-wlm, munge and jq from Debian when
# missing. Every daemon, job, temporary file and process it starts is stopped or removed on
# exit, error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "slurm-reproduce: cannot run: $*" >&2; exit 2; }
fail() { echo "slurm-reproduce: $*" >&2; exit 1; }

EXPERIMENT=all SCALE=quick REPEATS=3 SEED=1 PARALLEL=1 OUT=target/slurm-reproduce
PAGODA=${PAGODA:-} TIMEOUT_MIN=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value (see the header of $0)"
  case $1 in
    --experiment) EXPERIMENT=$2 ;;
    --scale) SCALE=$2 ;;
    --repeats) REPEATS=$2 ;;
    --seed) SEED=$2 ;;
    --parallel) PARALLEL=$2 ;;
    --out) OUT=$2 ;;
    --pagoda) PAGODA=$2 ;;
    --timeout) TIMEOUT_MIN=$2 ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
  shift 2
done
for n in "$REPEATS" "$SEED" "$PARALLEL" ${TIMEOUT_MIN:+"$TIMEOUT_MIN"}; do
  [[ $n =~ ^[0-9]+$ ]] || die "'$n' is not a whole number (--repeats, --seed, --parallel, --timeout)"
done
[ "$PARALLEL" -ge 1 ] || die "--parallel 0 runs nothing; give 1 or more"

[ "$(id -u)" = 0 ] || die "needs root (it starts munged, slurmctld and slurmd); run it with sudo"
need=()
for b in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo scancel jq; do
  command -v "$b" >/dev/null || need+=("$b")
done
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null \
    || die "${need[*]} missing and no apt-get here; install Slurm (slurmctld, slurmd), munge and jq"
  echo "slurm-reproduce: installing slurm-wlm, munge and jq from Debian..."
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge jq; } \
    >/dev/null 2>&1 || die "apt-get install slurm-wlm munge jq failed (no network to Debian's mirror?)"
  for b in "${need[@]}"; do
    command -v "$b" >/dev/null || die "$b still missing after installing slurm-wlm, munge and jq"
  done
fi
if [ -z "$PAGODA" ]; then
  cargo build --release -q -p pagoda || die "cargo build --release -p pagoda failed"
  # The crash cells run `pagoda crashtest`, which runs the crash tester built beside it.
  cargo build --release -q -p pagoda-crashtest-cli \
    || die "cargo build --release -p pagoda-crashtest-cli failed"
  PAGODA=${CARGO_TARGET_DIR:-target}/release/pagoda
fi
[ -x "$PAGODA" ] || die "$PAGODA is not an executable pagoda binary (--pagoda PATH)"
PAGODA=$(cd "$(dirname "$PAGODA")" && pwd)/$(basename "$PAGODA")
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The plan's command lines are split on spaces inside the array task.
[[ $OUT$PAGODA != *[[:space:]]* ]] || die "paths with spaces are not supported: $OUT, $PAGODA"

# The plan first: a bad experiment or scale fails here, before any daemon starts.
plan_args=(reproduce plan --scale "$SCALE" --repeats "$REPEATS" --seed "$SEED" --out "$OUT")
[ "$EXPERIMENT" = all ] || plan_args+=(--experiment "$EXPERIMENT")
PLAN=$("$PAGODA" "${plan_args[@]}") || exit 2

WORK="" JOB="" MUNGED_PID="" CTLD_PID="" SLURMD_PID=""
# Stops a daemon by pid: TERM, up to 20 s, then KILL.
stop() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
  set +e
  # A second Ctrl-C must not cut the cleanup short and leave daemons behind.
  trap '' INT TERM HUP
  if [ -n "$JOB" ]; then
    scancel "$JOB" 2>/dev/null
    for _ in $(seq 60); do [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break; sleep 0.5; done
    # Any process of a job step that outlived the cancel (this private cluster runs only ours).
    for p in $(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }'); do
      kill -9 "$p" 2>/dev/null
    done
  fi
  pid_of() { [ -s "$1" ] && cat "$1"; }
  [ -n "$WORK" ] && { SLURMD_PID=${SLURMD_PID:-$(pid_of "$WORK/slurmd.pid")};
                      CTLD_PID=${CTLD_PID:-$(pid_of "$WORK/slurmctld.pid")};
                      MUNGED_PID=${MUNGED_PID:-$(pid_of "$WORK/munged.pid")}; }
  stop "$SLURMD_PID"; stop "$CTLD_PID"; stop "$MUNGED_PID"
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
}
trap cleanup EXIT
trap 'echo "slurm-reproduce: interrupted; stopping the job and the daemons" >&2; exit 130' INT TERM HUP

WORK=$(mktemp -d /tmp/pagoda-slurm.XXXXXX)
mkdir -p "$WORK/state" "$WORK/spool" "$OUT/slurm"

# munge: a fresh key and a private socket, so no system munged is touched.
mungekey -c -k "$WORK/munge.key" >/dev/null 2>&1 || die "mungekey could not create a key"
munged --force --key-file="$WORK/munge.key" --socket="$WORK/munge.sock" \
  --pid-file="$WORK/munged.pid" --log-file="$WORK/munged.log" --seed-file="$WORK/munged.seed" \
  || die "munged did not start ($(tail -1 "$WORK/munged.log" 2>/dev/null))"
MUNGED_PID=$(cat "$WORK/munged.pid")

# Two free TCP ports for slurmctld and slurmd (a system Slurm keeps 6817/6818).
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=""
for p in $(seq 16817 2 16917); do
  in_use "$p" || in_use $((p + 1)) || { PORT=$p; break; }
done
[ -n "$PORT" ] || die "no two free ports between 16817 and 16918 on 127.0.0.1"

NODE=$(hostname -s)
CPUS=$(nproc)
export SLURM_CONF=$WORK/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=pagoda
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge.sock
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
# No cgroups: this may be a container; the array's tasks are whole processes anyway.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MaxArraySize=100000
MinJobAge=3600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=pagoda Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -f "$SLURM_CONF" || die "slurmctld did not start ($(tail -1 "$WORK/slurmctld.log" 2>/dev/null))"
for _ in $(seq 40); do [ -s "$WORK/slurmctld.pid" ] && break; sleep 0.25; done
CTLD_PID=$(cat "$WORK/slurmctld.pid" 2>/dev/null || true)
slurmd -f "$SLURM_CONF" || die "slurmd did not start ($(tail -1 "$WORK/slurmd.log" 2>/dev/null))"
for _ in $(seq 40); do [ -s "$WORK/slurmd.pid" ] && break; sleep 0.25; done
SLURMD_PID=$(cat "$WORK/slurmd.pid" 2>/dev/null || true)
state=""
for _ in $(seq 120); do
  state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
  [[ $state == idle* || $state == mixed* ]] && break
  sleep 0.5
done
[[ $state == idle* || $state == mixed* ]] \
  || die "the Slurm node did not come up (state '${state:-none}'; $(tail -1 "$WORK/slurmd.log" 2>/dev/null))"
echo "slurm-reproduce: one-node Slurm up: $NODE, $CPUS CPUs, ports $PORT-$((PORT + 1)), config $SLURM_CONF"

# One array task per run of the plan: its `command`, with the binary's path and --jobs.
jq -r '.runs[].command' <<<"$PLAN" | sed "s|^pagoda |$PAGODA |; s|\$| --jobs $PARALLEL|" >"$WORK/commands"
RUNS=$(wc -l <"$WORK/commands")
[ "$RUNS" -gt 0 ] || die "the plan has no cells"
ESTIMATE=$(jq -r '.estimate_s' <<<"$PLAN")
TIMEOUT_S=$(( ${TIMEOUT_MIN:-$(( (ESTIMATE * 4 / PARALLEL + 59) / 60 + 10 ))} * 60 ))
cat >"$WORK/task.sh" <<EOF
#!/usr/bin/env bash
set -euo pipefail
line=\$(sed -n "\$((SLURM_ARRAY_TASK_ID + 1))p" "$WORK/commands")
echo "task \$SLURM_ARRAY_TASK_ID on \$(hostname -s): \$line"
exec \$line
EOF
chmod +x "$WORK/task.sh"
rm -f "$OUT"/slurm/*.log
# As `reproduce all` does: a rerun replaces the planned experiments' results, not others'.
for e in $(jq -r '.runs[].experiment' <<<"$PLAN" | sort -u); do rm -f "$OUT/cells/$e".*; done
JOB=$(sbatch --parsable --job-name=pagoda-reproduce --array="0-$((RUNS - 1))%$PARALLEL" \
  --cpus-per-task=1 --chdir="$OUT" --output="$OUT/slurm/%A_%a.log" "$WORK/task.sh") \
  || die "sbatch refused the job array"
JOB=${JOB%%;*}
echo "slurm-reproduce: job array $JOB: $RUNS cells ($(jq -r '.scale' <<<"$PLAN") scale), $PARALLEL at a time, about $(( (ESTIMATE / PARALLEL + 59) / 60 )) min by the plan"

start=$(date +%s) last=0
while [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ]; do
  now=$(date +%s)
  [ $((now - start)) -le "$TIMEOUT_S" ] \
    || fail "the job array did not finish within $((TIMEOUT_S / 60)) min (--timeout); cancelled"
  if [ $((now - last)) -ge 30 ]; then
    last=$now
    echo "slurm-reproduce: $(squeue -h -j "$JOB" -t R | wc -l) running, $(squeue -h -j "$JOB" -r -t PD | wc -l) pending, $((now - start)) s"
  fi
  sleep 2
done
WALL=$(( $(date +%s) - start ))

# Each task's end state, while slurmctld still keeps the finished records (MinJobAge).
scontrol show job "$JOB" -o | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | sed 's/^ */  /' >"$WORK/states"
done_ok=$(awk '$2 == "JobState=COMPLETED" { n += $1 } END { print n + 0 }' "$WORK/states")
JOB_DONE=$JOB JOB=""
echo "slurm-reproduce: job array $JOB_DONE finished in $WALL s: $done_ok of $RUNS tasks completed"
cat "$WORK/states"

"$PAGODA" reproduce report "$OUT"
if [ "$done_ok" -ne "$RUNS" ]; then
  fail "$((RUNS - done_ok)) task(s) did not complete; their logs are in $OUT/slurm/ and $OUT/cells/"
fi
