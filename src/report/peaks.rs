//! The theoretical peaks ([`crate::peak`]) as text for a person: the shared factors with their
//! sources, the CPU table, then memory, NICs and disk. `peakbench sysinfo` prints it and the
//! HTML report embeds it.

use crate::peak::{CpuFactors, CpuPeak, Factor, Form, Peaks, trim_float};

/// What the pair of clocks is: both with their sources and the measured one beside them, or
/// which one is unknown.
fn clock_pair_line(f: &CpuFactors) -> String {
    let measured = f
        .measured_ghz
        .value
        .map(|m| format!("; measured {} GHz", trim_float(m)))
        .unwrap_or_default();
    match (f.base_clock(), f.turbo_clock()) {
        (Some(b), Some(t)) => format!(
            "peaks at base and turbo: base {} GHz ({}), turbo {} GHz ({}){measured}",
            trim_float(b.value.unwrap_or_default()),
            b.source,
            trim_float(t.value.unwrap_or_default()),
            t.source
        ),
        (Some(b), None) => format!(
            "peaks at base only: base {} GHz ({}); the turbo clock is unknown ({}){measured}",
            trim_float(b.value.unwrap_or_default()),
            b.source,
            f.turbo_ghz.detail
        ),
        (None, Some(t)) => format!(
            "peaks at turbo only: turbo {} GHz ({}); the base clock is unknown (give \
             --cpu-ghz){measured}",
            trim_float(t.value.unwrap_or_default()),
            t.source
        ),
        (None, None) => format!(
            "no peak at base or turbo: neither clock is known (give --cpu-ghz and \
             --cpu-turbo-ghz){measured}"
        ),
    }
}

/// The peaks as a human table: the shared factors with their sources, then one row per
/// precision × ISA × FMA choice, then memory, NICs and disk.
pub(crate) fn render(peaks: &Peaks) -> String {
    let mut out = String::from("Peaks\n");
    factor_lines(&peaks.cpu.factors, &mut out);
    cpu_table(&peaks.cpu.table, &mut out);
    device_lines(peaks, &mut out);
    out
}

/// The factors every CPU row shares, with their sources.
fn factor_lines(f: &CpuFactors, out: &mut String) {
    out.push_str(&format!("  {}\n", &f.cores.describe("cores")));
    out.push_str(&format!("  {}\n", &f.ghz.describe("clock GHz")));
    out.push_str(&format!("  {}\n", &f.measured_ghz.describe("measured GHz")));
    out.push_str(&format!("  {}\n", &f.turbo_ghz.describe("turbo GHz")));
    out.push_str(&format!(
        "  peaks below use {}\n",
        f.effective_clock().describe("clock GHz")
    ));
    for (licence, name) in [
        (&f.avx512_ghz, "512-bit floating point and dot products"),
        (&f.amx_ghz, "AMX tiles"),
    ] {
        if *licence != Factor::default() {
            out.push_str(&format!(
                "  {}\n",
                licence.describe(&format!("clock GHz of {name}"))
            ));
        }
    }
    out.push_str(&format!("  {}\n", clock_pair_line(f)));
    for (i, width) in ["128", "256", "512"].iter().enumerate() {
        out.push_str(&format!(
            "  {}\n",
            &f.fma_units[i].describe(&format!("FMA units at {width} bit"))
        ));
    }
}

/// One line per CPU peak row, with the peaks at base and turbo where a row has them.
fn cpu_table(table: &[CpuPeak], out: &mut String) {
    let paired = table
        .iter()
        .any(|r| r.at_base.is_some() || r.at_turbo.is_some());
    out.push_str("  precision  isa     fma    lanes  op/cycle/core  peak");
    out.push_str(if paired {
        "  (at base / at turbo)\n"
    } else {
        "\n"
    });
    for row in table {
        let precision = match row.form {
            Form::Arith => row.precision.name().to_string(),
            Form::Dot => format!("{} dot", row.precision.name()),
            Form::Tile => format!("{} amx", row.precision.name()),
        };
        out.push_str(&format!(
            "  {:<9}  {:<6}  {:<5}  {:>5}  {:>13}  {}\n",
            precision,
            if row.form == Form::Tile {
                "amx"
            } else {
                row.isa.name()
            },
            if row.precision.is_float() && row.form == Form::Arith {
                if row.fma { "yes" } else { "no" }
            } else {
                "-"
            },
            row.lanes,
            row.per_cycle_per_core
                .map(trim_float)
                .unwrap_or_else(|| "?".into()),
            row.value
                .map(|v| format!("{} {}", trim_float((v * 10.0).round() / 10.0), row.unit))
                .unwrap_or_else(|| format!("unknown ({})", row.units.detail)),
        ));
        if paired && row.value.is_some() {
            let cell = |v: Option<f64>| {
                v.map(|v| trim_float((v * 10.0).round() / 10.0))
                    .unwrap_or_else(|| "unknown".into())
            };
            // Inside the line just written, before its newline.
            out.pop();
            out.push_str(&format!(
                "  ({} / {})\n",
                cell(row.at_base),
                cell(row.at_turbo)
            ));
        }
    }
}

/// The memory, NIC and disk peaks.
fn device_lines(peaks: &Peaks, out: &mut String) {
    let m = &peaks.memory;
    out.push_str(&format!(
        "  memory: {}\n",
        match m.value {
            Some(v) => format!(
                "{} GB/s = {} × {} × 8 B",
                trim_float(v),
                &m.channels.describe("channels"),
                &m.mts.describe("MT/s")
            ),
            None => format!(
                "unknown: {}; {}",
                &m.channels.describe("channels"),
                &m.mts.describe("MT/s")
            ),
        }
    ));
    for nic in &peaks.nics {
        out.push_str(&format!(
            "  nic {}: {}\n",
            nic.interface,
            &nic.gbps.describe("Gb/s")
        ));
    }
    let (read_mbps, write_mbps) = peaks.disk.ratings(false);
    let (read_iops, write_iops) = peaks.disk.ratings(true);
    out.push_str(&format!(
        "  disk read: {}; {}\n  disk write: {}; {}\n",
        read_mbps.describe("MB/s"),
        read_iops.describe("IOPS"),
        write_mbps.describe("MB/s"),
        write_iops.describe("IOPS")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::PeakOverrides;
    use crate::peak::MeasuredFactors;
    use crate::peak::tests::{fixture_host, probes};
    use crate::sysinfo::{Fact, SysInfo};

    fn rendered(host: &SysInfo, flags: &PeakOverrides, probes: &MeasuredFactors) -> String {
        render(&Peaks::compute(host, flags, probes))
    }

    /// A core that runs 512-bit floating point slower than plain adds (its AVX-512 licence) has
    /// a line for the clock those rows stand on.
    #[test]
    fn the_clock_of_a_licence_has_its_own_line() {
        let licensed = MeasuredFactors {
            avx512_clock_ratio: Some(0.93),
            amx_clock_ratio: Some(0.99),
            ..probes()
        };
        let text = rendered(&fixture_host(), &PeakOverrides::default(), &licensed);
        assert!(
            text.contains("clock GHz of 512-bit floating point and dot products 2.511"),
            "{text}"
        );
    }

    /// A model that users reported from (a Xeon E5-2670 v3), seen without cpufreq: both clocks
    /// of the pair with their sources, and the peaks at each beside every row.
    #[test]
    fn a_known_model_shows_the_pair_with_both_sources() {
        let mut host = fixture_host();
        host.cpu.model_name = "Intel(R) Xeon(R) CPU E5-2670 v3 @ 2.30GHz".into();
        host.cpu.base_ghz = Fact::read(2.3, "model name string");
        let text = rendered(&host, &PeakOverrides::default(), &probes());
        assert!(
            text.contains("peaks at base and turbo: base 2.3 GHz (model-string), turbo 3.1 GHz (known-models); measured 2.7 GHz"),
            "{text}"
        );
        assert!(text.contains("(at base / at turbo)"), "{text}");
    }

    /// A base clock (the host's nominal `cpu MHz`) and no turbo anywhere, then only a turbo:
    /// the text says which clock is known and the unknown column says so.
    #[test]
    fn only_one_clock_known_says_which() {
        let text = rendered(&fixture_host(), &PeakOverrides::default(), &probes());
        assert!(text.contains("peaks at base only: base 2.596"), "{text}");
        assert!(text.contains("(at base / at turbo)"), "{text}");
        assert!(
            text.contains(" / unknown)\n"),
            "the turbo column says so: {text}"
        );
        let mut host = fixture_host();
        host.cpu.current_ghz = Fact::unknown("none");
        let flags = PeakOverrides {
            cpu_turbo_ghz: Some(3.0),
            ..PeakOverrides::default()
        };
        let text = rendered(&host, &flags, &probes());
        assert!(
            text.contains("peaks at turbo only: turbo 3 GHz (flag)"),
            "{text}"
        );
    }
}
