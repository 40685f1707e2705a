//! The standard tools for CPU peaks: likwid-bench's peakflops kernels and hpcc's HPL.
//!
//! Each is run with the case's own parameters (precision, ISA, FMA and threads; order n and
//! cores) right after the case, and its value becomes the result's `reference`.

use std::time::Duration;

use crate::peak::{Isa, Precision};
use crate::reference::{Invocation, Reading, Source, ToolSpec};
use crate::result::Reference;

pub(crate) const LIKWID: ToolSpec = ToolSpec {
    name: "likwid-bench",
    program: "likwid-bench",
    install: "apt-get install likwid",
};

pub(crate) const HPCC: ToolSpec = ToolSpec {
    name: "hpcc HPL",
    program: "hpcc",
    install: "apt-get install hpcc openmpi-bin",
};

pub(crate) const MPIRUN: ToolSpec = ToolSpec {
    name: "mpirun",
    program: "mpirun",
    install: "apt-get install openmpi-bin",
};

/// likwid-bench's kernel for a precision, ISA and FMA choice, or why there is none.
pub(crate) fn likwid_kernel(
    precision: Precision,
    isa: Isa,
    fma: bool,
) -> Result<&'static str, String> {
    let kernel = match (precision, isa, fma) {
        (Precision::F64, Isa::Scalar, false) => "peakflops",
        (Precision::F64, Isa::Sse, false) => "peakflops_sse",
        (Precision::F64, Isa::Avx2, false) => "peakflops_avx",
        (Precision::F64, Isa::Avx2, true) => "peakflops_avx_fma",
        (Precision::F64, Isa::Avx512, false) => "peakflops_avx512",
        (Precision::F64, Isa::Avx512, true) => "peakflops_avx512_fma",
        (Precision::F32, Isa::Scalar, false) => "peakflops_sp",
        (Precision::F32, Isa::Sse, false) => "peakflops_sp_sse",
        (Precision::F32, Isa::Avx2, false) => "peakflops_sp_avx",
        (Precision::F32, Isa::Avx2, true) => "peakflops_sp_avx_fma",
        (Precision::F32, Isa::Avx512, false) => "peakflops_sp_avx512",
        (Precision::F32, Isa::Avx512, true) => "peakflops_sp_avx512_fma",
        (p, _, _) if !p.is_float() => {
            return Err("likwid-bench has no integer peak kernel".into());
        }
        (p, isa, fma) => {
            return Err(format!(
                "likwid-bench has no {} {} kernel {} FMA",
                p.name(),
                isa.name(),
                if fma { "with" } else { "without" }
            ));
        }
    };
    Ok(kernel)
}

/// Runs likwid-bench's peakflops kernel matching the case, GFLOP/s.
///
/// 32 kB per thread keeps the kernel's single load stream in L1, as likwid's documentation
/// suggests for peakflops; likwid counts an FMA as 2 FLOPs, as peakbench does.
pub(crate) fn likwid_peakflops(
    precision: Precision,
    isa: Isa,
    fma: bool,
    threads: usize,
) -> anyhow::Result<Reference> {
    let kernel = match likwid_kernel(precision, isa, fma) {
        Ok(k) => k,
        Err(why) => return Ok(LIKWID.failed("", why)),
    };
    let args = vec![
        "-t".to_string(),
        kernel.to_string(),
        "-W".to_string(),
        format!("N:{}kB:{threads}", 32 * threads),
    ];
    let mut run = Invocation::new(LIKWID, args, Duration::from_secs(120), |stdout| {
        let mflops =
            parse_likwid_mflops(stdout).ok_or("no MFlops/s line in likwid-bench's output")?;
        Ok(Reading {
            value: mflops / 1000.0,
            note: None,
        })
    });
    if threads > crate::runner::num_cpus() {
        run = run.refuse("likwid-bench runs at most one thread per CPU");
    }
    run.run()
}

/// The `MFlops/s:` figure of likwid-bench's report.
pub(crate) fn parse_likwid_mflops(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("MFlops/s:"))
        .and_then(|v| v.trim().parse().ok())
}

/// HPL's block size.
pub(crate) const HPL_NB: u32 = 192;

/// hpcc's input: one HPL problem of order n on a 1 × cores grid; the other tests minimal.
pub(crate) fn hpcc_input(n: u64, cores: usize) -> String {
    let lines = [
        "HPLinpack benchmark input file".to_string(),
        "written by peakbench --reference".to_string(),
        "HPL.out      output file name (if any)".to_string(),
        "8            device out (6=stdout,7=stderr,file)".to_string(),
        "1            # of problems sizes (N)".to_string(),
        format!("{n}          Ns"),
        "1            # of NBs".to_string(),
        format!("{HPL_NB}          NBs"),
        "0            PMAP process mapping (0=Row-,1=Column-major)".to_string(),
        "1            # of process grids (P x Q)".to_string(),
        "1            Ps".to_string(),
        format!("{cores}            Qs"),
        "16.0         threshold".to_string(),
        "1            # of panel fact".to_string(),
        "2            PFACTs (0=left, 1=Crout, 2=Right)".to_string(),
        "1            # of recursive stopping criterium".to_string(),
        "4            NBMINs (>= 1)".to_string(),
        "1            # of panels in recursion".to_string(),
        "2            NDIVs".to_string(),
        "1            # of recursive panel fact.".to_string(),
        "1            RFACTs (0=left, 1=Crout, 2=Right)".to_string(),
        "1            # of broadcast".to_string(),
        "1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)".to_string(),
        "1            # of lookahead depth".to_string(),
        "1            DEPTHs (>=0)".to_string(),
        "2            SWAP (0=bin-exch,1=long,2=mix)".to_string(),
        "64           swapping threshold".to_string(),
        "0            L1 in (0=transposed,1=no-transposed) form".to_string(),
        "0            U  in (0=transposed,1=no-transposed) form".to_string(),
        "1            Equilibration (0=no,1=yes)".to_string(),
        "8            memory alignment in double (> 0)".to_string(),
        "##### separator line, ignored by hpcc #####".to_string(),
        "0            Number of additional problem sizes for PTRANS".to_string(),
        "1200         values of N".to_string(),
        "0            number of additional blocking sizes for PTRANS".to_string(),
        "40           values of NB".to_string(),
    ];
    lines.join("\n") + "\n"
}

/// Runs hpcc's HPL at order n with one MPI rank per core, GFLOP/s.
pub(crate) fn hpcc_hpl(n: u64, cores: usize) -> anyhow::Result<Reference> {
    let mut args = Vec::new();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        args.push("--allow-run-as-root".to_string());
    }
    args.extend(["--oversubscribe", "-np"].map(String::from));
    args.push(cores.to_string());
    args.push(HPCC.program.into());
    // The solve alone at a pessimistic 1 GFLOP/s per core, plus hpcc's other tests.
    let seconds = 2.0 / 3.0 * (n as f64).powi(3) / (1e9 * cores as f64) + 120.0;
    Invocation::new(HPCC, args, Duration::from_secs_f64(seconds), |text| {
        let tflops = parse_hpl_tflops(text).ok_or("no HPL_Tflops in hpccoutf.txt")?;
        Ok(Reading {
            value: tflops * 1000.0,
            note: Some("HPL's speed follows the BLAS hpcc is linked with".into()),
        })
    })
    .launched_by(MPIRUN)
    .input_file(
        "hpccinf.txt",
        hpcc_input(n, cores),
        format!("N={n}, NB={HPL_NB}, P=1, Q={cores}"),
    )
    .env("OMP_NUM_THREADS", "1")
    .env("OPENBLAS_NUM_THREADS", "1")
    .read_from(Source::File("hpccoutf.txt".into()))
    .run()
}

/// The `HPL_Tflops=` figure of hpcc's summary.
pub(crate) fn parse_hpl_tflops(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("HPL_Tflops="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn likwid_kernels_match_isa_precision_and_fma() {
        assert_eq!(
            likwid_kernel(Precision::F64, Isa::Avx512, true),
            Ok("peakflops_avx512_fma")
        );
        assert_eq!(
            likwid_kernel(Precision::F32, Isa::Avx2, false),
            Ok("peakflops_sp_avx")
        );
        assert!(likwid_kernel(Precision::I32, Isa::Avx512, false).is_err());
        assert!(likwid_kernel(Precision::F64, Isa::Sse, true).is_err());
    }

    #[test]
    fn parses_the_tools_reports() {
        let likwid = "Cycles:\t\t\t1234\nMFlops/s:\t\t115432.12\nTime:\t\t1.0 sec\n";
        assert_eq!(parse_likwid_mflops(likwid), Some(115432.12));
        assert_eq!(parse_likwid_mflops("nothing"), None);
        let hpcc = "HPL_Tflops=0.0873\nHPL_time=12.0\n";
        assert_eq!(parse_hpl_tflops(hpcc), Some(0.0873));
        assert_eq!(parse_hpl_tflops("HPL_Tflops=0\n"), None);
    }

    #[test]
    fn the_hpl_input_has_the_order_and_the_grid() {
        let text = hpcc_input(4000, 2);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[5].starts_with("4000 "));
        assert!(lines[10].starts_with("1 "));
        assert!(lines[11].starts_with("2 "));
    }
}
