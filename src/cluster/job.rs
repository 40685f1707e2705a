//! The batch job a cluster run is part of, as the scheduler tells its processes: Slurm's
//! `SLURM_*` variables (set by `sbatch`, `salloc` and `srun`, and inherited by the ranks that
//! `mpirun` starts through `srun` inside an allocation). Rank 0 reads its own environment; the
//! document records the job beside the MPI world (`cluster.job`).

// Without the `mpi` feature no cluster job runs, but this module is still built: its tests run
// in every build, and the exporters read the documents it describes.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::collections::BTreeMap;

use crate::result::BatchJob;

/// The variables kept: what identifies the job and the allocation the ranks ran in. The
/// others (paths, the submitting user's environment, the step's own CPU binding) are left out.
const KEPT: [&str; 18] = [
    "SLURM_CLUSTER_NAME",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_QOS",
    "SLURM_JOB_RESERVATION",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_MPI_TYPE",
    "SLURM_STEP_ID",
    "SLURM_SUBMIT_HOST",
    "SLURM_ARRAY_JOB_ID",
];

/// The job the `vars` (an environment) describe, or `None` outside a batch job.
pub(crate) fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Option<BatchJob> {
    let variables: BTreeMap<String, String> = vars
        .into_iter()
        .filter(|(k, _)| KEPT.contains(&k.as_str()))
        .collect();
    let id = variables.get("SLURM_JOB_ID")?.clone();
    let nodelist = variables.get("SLURM_JOB_NODELIST").cloned();
    Some(BatchJob {
        scheduler: "slurm".into(),
        id,
        name: variables.get("SLURM_JOB_NAME").cloned(),
        partition: variables.get("SLURM_JOB_PARTITION").cloned(),
        nodes: nodelist.as_deref().map(expand).unwrap_or_default(),
        nodelist,
        variables,
    })
}

/// Slurm's compressed host list (`node-[0-2,5],login`, `r[1-2]n[01-02]`) as host names, in
/// its order; zero-padded ranges keep their width.
pub(crate) fn expand(list: &str) -> Vec<String> {
    split_top(list)
        .into_iter()
        .flat_map(|name| expand_one(&name))
        .collect()
}

/// Splits at the commas outside brackets.
fn split_top(list: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts.retain(|p| !p.is_empty());
    parts
}

/// One name with any number of bracketed ranges, each expanded in turn.
fn expand_one(name: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (name.find('['), name.find(']')) else {
        return vec![name.to_string()];
    };
    if close < open {
        return vec![name.to_string()];
    }
    let (prefix, ranges, rest) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    let tails = expand_one(rest);
    let mut out = Vec::new();
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (Ok(a), Ok(b)) = (lo.parse::<u64>(), hi.parse::<u64>()) else {
            // Not a range Slurm writes: kept as written rather than guessed.
            return vec![name.to_string()];
        };
        let width = if lo.starts_with('0') { lo.len() } else { 0 };
        for n in a..=b {
            for tail in &tails {
                out.push(format!("{prefix}{n:0width$}{tail}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn host_lists_expand_as_slurm_writes_them() {
        assert_eq!(
            expand("node-[0-2,5],login"),
            ["node-0", "node-1", "node-2", "node-5", "login"]
        );
        assert_eq!(
            expand("r[1-2]n[08-10]"),
            ["r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"]
        );
        assert_eq!(expand("single"), ["single"]);
        assert_eq!(expand("odd[x-y]"), ["odd[x-y]"]);
        assert!(expand("").is_empty());
    }

    #[test]
    fn a_slurm_job_is_read_from_its_variables_and_nothing_else() {
        let job = from_env(env(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURM_JOB_NAME", "cluster"),
            ("SLURM_JOB_PARTITION", "debug"),
            ("SLURM_JOB_NODELIST", "node-[0-1]"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_SUBMIT_DIR", "/home/someone"),
            ("PATH", "/usr/bin"),
        ]))
        .expect("a job");
        assert_eq!(job.scheduler, "slurm");
        assert_eq!(job.id, "42");
        assert_eq!(job.name.as_deref(), Some("cluster"));
        assert_eq!(job.partition.as_deref(), Some("debug"));
        assert_eq!(job.nodes, ["node-0", "node-1"]);
        assert_eq!(job.nodelist.as_deref(), Some("node-[0-1]"));
        let kept: Vec<&str> = job.variables.keys().map(String::as_str).collect();
        assert_eq!(
            kept,
            [
                "SLURM_JOB_ID",
                "SLURM_JOB_NAME",
                "SLURM_JOB_NODELIST",
                "SLURM_JOB_NUM_NODES",
                "SLURM_JOB_PARTITION"
            ]
        );
    }

    #[test]
    fn no_job_outside_a_scheduler() {
        assert!(from_env(env(&[("PATH", "/usr/bin"), ("OMPI_COMM_WORLD_RANK", "0")])).is_none());
    }
}
