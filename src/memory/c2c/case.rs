//! The one case of `peakbench mem c2c`: the matrix, once per repetition.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::plan::{Case, CaseFile, CaseSpec, Context, guess};
use crate::result::{BenchResult, Params, Subsystem};
use crate::sysinfo::c2c::pingpong::{PairSettings, measure_pair};
use crate::sysinfo::c2c::{C2cMatrix, C2cMode, KernelTopology, PairCell, infer, measured_cores};

pub(super) struct C2cCase {
    pub mode: C2cMode,
    pub cpus: Vec<usize>,
    pub pairs: Vec<[usize; 2]>,
    pub sampled: Option<String>,
    pub pair_time: Duration,
    pub svg: Option<PathBuf>,
}

/// How a round trip is counted, as the result states it.
const COUNTING: &str = "one round trip = CPU A → CPU B → CPU A of one 64-byte line (A publishes, \
     B answers, A sees the answer); a pair's value is the median of batches timed by the \
     monotonic clock (wall time / round trips); the headline is the median over pairs; \
     core-to-core-latency's figures are half a round trip, so its reference is × 2";

impl C2cCase {
    /// Each pair's median per repetition, pairs in order; and each repetition's wall time.
    fn measure(&self, reps: usize) -> Result<(Vec<Vec<f64>>, Vec<Duration>)> {
        let settings = PairSettings {
            mode: self.mode,
            time: self.pair_time,
            ..PairSettings::default()
        };
        let mut cells = vec![Vec::with_capacity(reps); self.pairs.len()];
        let mut walls = Vec::with_capacity(reps);
        for _ in 0..reps {
            let start = Instant::now();
            for (pair, cell) in self.pairs.iter().zip(&mut cells) {
                if crate::interrupt::requested() {
                    anyhow::bail!(crate::interrupt::Interrupted);
                }
                cell.push(measure_pair(*pair, &settings)?.median_ns);
            }
            walls.push(start.elapsed());
        }
        Ok((cells, walls))
    }

    /// The matrix from the measured cells, with what it shows and what the kernel says.
    fn matrix(&self, ctx: &Context, cells: Vec<Vec<f64>>) -> C2cMatrix {
        let pairs: Vec<PairCell> = self
            .pairs
            .iter()
            .zip(cells)
            .map(|(&cpus, repetitions_ns)| PairCell {
                cpus,
                median_ns: crate::stats::median(&repetitions_ns).unwrap_or(f64::NAN),
                repetitions_ns,
                reference_ns: None,
            })
            .collect();
        let mut matrix = C2cMatrix {
            mode: self.mode,
            cpus: self.cpus.clone(),
            pairs,
            sampled: self.sampled.clone(),
            inferred: Vec::new(),
            kernel: KernelTopology::read(&self.cpus),
            measured_cores: None,
        };
        matrix.inferred = infer(&matrix.medians());
        let reps: Vec<_> = (0..matrix.repetitions())
            .map(|r| matrix.repetition(r))
            .collect();
        matrix.measured_cores = measured_cores(
            &reps,
            self.cpus.len(),
            ctx.host.cpu.physical_cores,
            ctx.host.cpu.logical_cpus,
        );
        matrix
    }
}

impl Case for C2cCase {
    fn spec(&self) -> CaseSpec {
        let mut params = Params {
            threads: Some(2),
            pinned: Some(true),
            duration_s: Some(self.pair_time.as_secs_f64()),
            ..Params::default()
        };
        params.other.insert("mode".into(), self.mode.name().into());
        params.other.insert("cpus".into(), self.cpus.len().into());
        params.other.insert("pairs".into(), self.pairs.len().into());
        CaseSpec {
            id: format!(
                "mem-c2c-{}-{}",
                self.mode,
                crate::sysinfo::format_cpu_list(&self.cpus)
            ),
            label: format!(
                "mem c2c {} over CPUs {} ({} pairs)",
                self.mode,
                crate::sysinfo::format_cpu_list(&self.cpus),
                self.pairs.len()
            ),
            subsystem: Subsystem::Memory,
            op: "c2c".into(),
            params,
        }
    }

    fn estimate(&self, ctx: &Context) -> Duration {
        // A pair's calibration and threads cost about a millisecond beside its time.
        let per_pair = self.pair_time + Duration::from_millis(1);
        guess::times(
            per_pair,
            self.pairs.len() as u64 * u64::from(ctx.runner.repetitions.max(1)),
        )
    }

    fn run(&self, ctx: &Context) -> Result<BenchResult> {
        let reps = ctx.runner.repetitions.max(1) as usize;
        let (cells, walls) = self.measure(reps)?;
        let mut matrix = self.matrix(ctx, cells);
        let per_rep = |f: fn(&[f64]) -> Option<f64>| -> Vec<f64> {
            (0..reps)
                .filter_map(|r| {
                    let values: Vec<f64> = matrix.repetition(r).iter().map(|p| p.2).collect();
                    f(&values)
                })
                .collect()
        };
        let medians = per_rep(crate::stats::median);
        let fastest = per_rep(|v| v.iter().copied().reduce(f64::min));
        let slowest = per_rep(|v| v.iter().copied().reduce(f64::max));
        let reference = ctx
            .runner
            .reference
            .then(|| super::reference::run(self.mode, &self.cpus, &mut matrix))
            .transpose()?;
        let warnings = matrix.kernel.disagreements(
            matrix
                .inferred
                .iter()
                .find(|l| l.is_siblings())
                .map_or(&[][..], |l| &l.groups),
        );
        let mut result = self
            .spec()
            .measured(&ctx.host.hostname, "round trip", "ns", COUNTING.into(), medians)?
            .walls(walls)
            .extra("fastest pair", "ns", &fastest)
            .extra("slowest pair", "ns", &slowest)
            .param("c2c", serde_json::to_value(&matrix)?)
            .warn(warnings.into_iter().map(|w| {
                format!("{w}: the peaks count the kernel's cores unless the matrix's signal is clear (see docs/memory.md)")
            }));
        if let Some(reference) = reference {
            result = result.reference(reference);
        }
        Ok(result.finish())
    }

    /// With `--svg FILE`, the heat map of the matrix the result carries.
    fn files(&self, result: &BenchResult) -> Result<Vec<CaseFile>> {
        let Some(path) = &self.svg else {
            return Ok(Vec::new());
        };
        let matrix = crate::report::c2c::matrix_of(result)
            .ok_or_else(|| anyhow::anyhow!("--svg: the result carries no matrix to draw"))?;
        Ok(vec![CaseFile {
            flag: "--svg",
            path: path.clone(),
            bytes: crate::report::c2c::svg(&matrix, &result.host).into_bytes(),
        }])
    }
}

/// The lines printed after the run: the matrix, the groups, the kernel's claims beside them.
pub(super) fn summary(_: &Context, results: &[&BenchResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| crate::report::c2c::matrix_of(r))
        .flat_map(|m| crate::report::c2c::lines(&m))
        .collect()
}
