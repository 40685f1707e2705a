//! Human units for sizes, durations and counts, read and written one way everywhere.
//!
//! Sizes are explicit about their base: `KB`, `MB`, `GB`, `TB` are decimal (10³, 10⁶, …) and
//! `KiB`, `MiB`, `GiB`, `TiB` are binary (2¹⁰, 2²⁰, …), as in SI and IEC 80000-13. A bare `K`,
//! `M` or `G` is refused as ambiguous rather than silently read one way. A number without a unit
//! is bytes. Throughput is printed in decimal units (MB/s, GB/s, Gb/s) like STREAM, fio's
//! `MB/s` column and iperf3's `Mbits/sec`; sizes are printed in whichever base represents them
//! exactly (8 KB, 4 KiB), so a printed size can be pasted back as an argument.

use std::time::Duration;

/// Why a value could not be read; the caller adds the flag's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UnitError(pub String);

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Parses a size such as `8`, `8B`, `8KB`, `1.5GiB` or `80 MB` into bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, UnitError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim();
    let fix = "write a number with B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 8KB or 4KiB";
    if number.is_empty() {
        return Err(UnitError(format!("'{text}' is not a size: {fix}")));
    }
    let multiplier = if unit.is_empty() {
        1
    } else if let Some((_, m)) = SIZE_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
    {
        // KiB and KIB mean the same; kb and KB too. Only the 'i' decides the base.
        *m
    } else if matches!(unit, "k" | "K" | "m" | "M" | "g" | "G" | "t" | "T") {
        return Err(UnitError(format!(
            "'{text}' is ambiguous: write {number}{u}B for powers of 1000 or {number}{u}iB for powers of 1024",
            u = unit.to_ascii_uppercase()
        )));
    } else {
        return Err(UnitError(format!(
            "'{text}' has an unknown unit '{unit}': {fix}"
        )));
    };
    let bytes = if number.contains('.') {
        let value: f64 = number
            .parse()
            .map_err(|_| UnitError(format!("'{text}' is not a size: {fix}")))?;
        let bytes = value * multiplier as f64;
        if bytes.fract() != 0.0 || bytes > u64::MAX as f64 {
            return Err(UnitError(format!(
                "'{text}' is not a whole number of bytes"
            )));
        }
        bytes as u64
    } else {
        let value: u64 = number
            .parse()
            .map_err(|_| UnitError(format!("'{text}' is too large or not a number")))?;
        value
            .checked_mul(multiplier)
            .ok_or_else(|| UnitError(format!("'{text}' is too large")))?
    };
    Ok(bytes)
}

/// Longest duration any flag takes: a day. Longer is a typo (and `1e20` s overflowed a
/// `Duration` and panicked).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// Parses a duration such as `10s`, `500ms`, `2m`, `1.5s` or a bare number of seconds, at most
/// [`MAX_DURATION`].
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let parsed = parse_any_duration(text)?;
    if parsed > MAX_DURATION {
        return Err(UnitError(format!(
            "'{}' is longer than a day, the longest duration peakbench takes: give e.g. 10s or 5m",
            text.trim()
        )));
    }
    Ok(parsed)
}

fn parse_any_duration(text: &str) -> Result<Duration, UnitError> {
    let text = text.trim();
    // A bare number is seconds; so is a decimal number of seconds ("1.5s"), which humantime
    // does not read.
    let seconds = text
        .parse::<f64>()
        .ok()
        .or_else(|| text.strip_suffix('s')?.parse::<f64>().ok());
    if let Some(seconds) = seconds.filter(|s| s.is_finite() && *s >= 0.0) {
        return Duration::try_from_secs_f64(seconds).map_err(|_| {
            UnitError(format!(
                "'{text}' is longer than a day, the longest duration peakbench takes: give e.g. 10s or 5m"
            ))
        });
    }
    humantime::parse_duration(text).map_err(|_| {
        UnitError(format!(
            "'{text}' is not a duration: write e.g. 10s, 500ms, 2m or 1.5s"
        ))
    })
}

/// Parses a count such as `1000000`, `1M` or `10k` (decimal multipliers, counts have no binary reading).
pub(crate) fn parse_count(text: &str) -> Result<u64, UnitError> {
    let text = text.trim();
    let (number, multiplier) = match text.chars().last() {
        Some('k' | 'K') => (&text[..text.len() - 1], 1_000),
        Some('M') => (&text[..text.len() - 1], 1_000_000),
        Some('G') => (&text[..text.len() - 1], 1_000_000_000),
        Some('T') => (&text[..text.len() - 1], 1_000_000_000_000),
        _ => (text, 1),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| {
            UnitError(format!(
                "'{text}' is not a count: write a whole number, e.g. 1000, 10k, 1M, 1G or 1T (decimal)"
            ))
        })
}

/// Formats a byte count exactly, in the base that represents it without a fraction
/// (`8 KB`, `4 KiB`, `1 GiB`, `1500 B`), preferring the larger unit.
pub(crate) fn format_size(bytes: u64) -> String {
    let mut best = (bytes, "B");
    for (unit, multiplier) in SIZE_UNITS.iter().skip(1) {
        if bytes >= *multiplier && bytes.is_multiple_of(*multiplier) && bytes / multiplier < best.0
        {
            best = (bytes / multiplier, unit);
        }
    }
    format!("{} {}", best.0, best.1)
}

/// Formats a size approximately in binary units for inventories ("31.4 GiB").
pub(crate) fn format_size_approx(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    // A size that rounds to a whole number at one decimal is written whole: a triad's set of
    // 32,760 B is "32 KiB" beside the 32 KiB sets, not "32.0 KiB".
    if unit == 0 || (value * 10.0).round() % 10.0 == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Formats a duration for plans and progress ("1.5 s", "12 min 30 s").
pub(crate) fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds < 60.0 {
        format!("{seconds:.1} s")
    } else if seconds < 3600.0 {
        format!("{} min {:.0} s", (seconds / 60.0) as u64, seconds % 60.0)
    } else {
        format!(
            "{} h {} min",
            (seconds / 3600.0) as u64,
            ((seconds % 3600.0) / 60.0) as u64
        )
    }
}

/// Formats a rate in bits per second with its decimal unit ("100 Mbit/s", "1.5 Gbit/s").
pub(crate) fn format_bitrate(bps: f64) -> String {
    let (value, unit) = [
        (1e12, "Tbit/s"),
        (1e9, "Gbit/s"),
        (1e6, "Mbit/s"),
        (1e3, "kbit/s"),
    ]
    .into_iter()
    .find(|(m, _)| bps.abs() >= *m)
    .map_or((bps, "bit/s"), |(m, u)| (bps / m, u));
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{} {unit}", format_value(value))
    }
}

/// Formats a value with three significant figures or more, keeping integers whole.
pub(crate) fn format_value(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else if magnitude == 0.0 {
        "0".to_string()
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_decimal_or_binary_as_written() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1B").unwrap(), 1);
        assert_eq!(parse_size("8KB").unwrap(), 8_000);
        assert_eq!(parse_size("8kb").unwrap(), 8_000);
        assert_eq!(parse_size("8KiB").unwrap(), 8_192);
        assert_eq!(parse_size("80 MB").unwrap(), 80_000_000);
        assert_eq!(parse_size("10MiB").unwrap(), 10 * 1024 * 1024);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert_eq!(parse_size("2TiB").unwrap(), 2 << 40);
    }

    #[test]
    fn bit_rates_read_with_their_unit() {
        assert_eq!(format_bitrate(100e6), "100 Mbit/s");
        assert_eq!(format_bitrate(1e9), "1 Gbit/s");
        assert_eq!(format_bitrate(1.5e9), "1.50 Gbit/s");
        assert_eq!(format_bitrate(64e3), "64 kbit/s");
        assert_eq!(format_bitrate(500.0), "500 bit/s");
    }

    #[test]
    fn bad_sizes_say_how_to_write_them() {
        assert!(
            parse_size("8QB")
                .unwrap_err()
                .0
                .contains("unknown unit 'QB'")
        );
        assert!(parse_size("8K").unwrap_err().0.contains("8KB"));
        assert!(parse_size("8K").unwrap_err().0.contains("8KiB"));
        assert!(parse_size("").is_err());
        assert!(parse_size("KB").is_err());
        assert!(parse_size("1.3B").is_err());
        assert!(parse_size("99999999999999TB").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("-1").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("1000").unwrap(), 1000);
        assert_eq!(parse_count("10k").unwrap(), 10_000);
        assert_eq!(parse_count("1M").unwrap(), 1_000_000);
        assert_eq!(parse_count("2G").unwrap(), 2_000_000_000);
        assert_eq!(parse_count("1T").unwrap(), 1_000_000_000_000);
        assert!(parse_count("20000000T").is_err(), "beyond 64 bits");
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("x").is_err());
    }

    #[test]
    fn sizes_print_exactly_and_round_trip() {
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(8_000), "8 KB");
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(1 << 30), "1 GiB");
        assert_eq!(format_size(80_000_000), "80 MB");
        assert_eq!(format_size(1500), "1500 B");
        for bytes in [1, 8, 1000, 1024, 8_000_000, 10 << 20, 1_000_000_000] {
            let printed = format_size(bytes).replace(' ', "");
            assert_eq!(parse_size(&printed).unwrap(), bytes);
        }
    }

    #[test]
    fn approximate_sizes_are_whole_where_they_round_whole() {
        assert_eq!(format_size_approx(32 << 10), "32 KiB");
        assert_eq!(format_size_approx(32_760), "32 KiB");
        assert_eq!(format_size_approx(33_000), "32.2 KiB");
        assert_eq!(
            format_size_approx((31.4 * (1u64 << 30) as f64) as u64),
            "31.4 GiB"
        );
        assert_eq!(format_size_approx(1000), "1000 B");
    }
}
