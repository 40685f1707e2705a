#!/bin/sh
# peakbench as Slurm's HealthCheckProgram: runs `peakbench check` against this node's baseline,
# drains the node with the check's reason when a case is slower than its baseline, and resumes
# it when it passes again, but only if this script drained it (its reasons start with
# "peakbench:"; a node an administrator drained stays drained, with their reason, even when
# its check fails).
#
# slurm.conf (see docs/check.md):
#   HealthCheckProgram=/usr/local/sbin/slurm-healthcheck.sh
#   HealthCheckInterval=3600
#   HealthCheckNodeState=IDLE,CYCLE
#
# slurmd runs it as root with a bare environment (PATH and SLURMD_NODENAME), so its settings
# are read from the shell file $PEAKBENCH_HEALTHCHECK_CONF (default
# /etc/default/peakbench-healthcheck), which may set:
#   PEAKBENCH           the binary (default: peakbench on PATH)
#   PEAKBENCH_BASELINE  check's --baseline: a file, or a directory of baselines, one per
#                       hardware fingerprint (default: /etc/peakbench/baselines)
#   PEAKBENCH_DB        the history the checks are stored in (default:
#                       /var/lib/peakbench/history.db)
#   PEAKBENCH_ARGS      more flags for check, e.g. "--dir /scratch --server storage01"
#   PEAKBENCH_LOCK      a lock file, so that two checks never overlap (default:
#                       /run/peakbench-healthcheck.lock)
#   PEAKBENCH_LOG       where check's messages go (default: /dev/null)
#   SLURM_CONF          for scontrol, where it is not the default
#
# What each exit code of `peakbench check` does here: 0 resumes a node this script drained;
# 1 (a regression, or a measurement that failed) drains the node with the reason, unless
# someone else drained it first; 2 (bad
# input: a bad baseline file, a bad flag) and 3 (no baseline for this hardware) leave the node
# as it is and say so in syslog: they are the check's configuration, not the node's health.
set -u
conf=${PEAKBENCH_HEALTHCHECK_CONF:-/etc/default/peakbench-healthcheck}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
PEAKBENCH=${PEAKBENCH:-peakbench}
BASELINE=${PEAKBENCH_BASELINE:-/etc/peakbench/baselines}
PEAKBENCH_DB=${PEAKBENCH_DB:-/var/lib/peakbench/history.db}
LOCK=${PEAKBENCH_LOCK:-/run/peakbench-healthcheck.lock}
LOG=${PEAKBENCH_LOG:-/dev/null}
export PEAKBENCH_DB
[ -n "${SLURM_CONF:-}" ] && export SLURM_CONF
node=${SLURMD_NODENAME:-$(hostname -s)}
tag="peakbench:"

say() {
    logger -t peakbench-healthcheck -- "$node: $*" 2>/dev/null || true
    echo "$node: $*" >>"$LOG" 2>/dev/null || true
}

mkdir -p "$(dirname "$PEAKBENCH_DB")"
# shellcheck disable=SC2086
reason=$(flock -E 75 -w 900 "$LOCK" "$PEAKBENCH" check --baseline "$BASELINE" --reason \
    ${PEAKBENCH_ARGS:-} 2>>"$LOG")
code=$?

case $code in
0)
    state=$(scontrol show node -o "$node" 2>/dev/null)
    case $state in
    *" State="*DRAIN*" Reason=$tag"*)
        say "healthy again: resumed"
        scontrol update NodeName="$node" State=RESUME
        ;;
    esac
    ;;
1)
    [ -n "$reason" ] || reason="$tag the check failed (exit 1): see $LOG"
    state=$(scontrol show node -o "$node" 2>/dev/null)
    case $state in
    *" State="*DRAIN*" Reason=$tag"*) ;;
    *" State="*DRAIN*)
        # Drained by someone else (an administrator's "maintenance"): their reason stays, or
        # a later passing check would find this script's and resume the node they drained.
        say "failing, already drained for another reason, left as it is: $reason"
        exit 0
        ;;
    esac
    say "draining: $reason"
    scontrol update NodeName="$node" State=DRAIN Reason="$reason"
    ;;
3)
    say "no baseline for this hardware in $BASELINE: nothing judged, node left as it is"
    ;;
*)
    say "peakbench check exited $code (bad input or interrupted): node left as it is"
    ;;
esac
exit 0
