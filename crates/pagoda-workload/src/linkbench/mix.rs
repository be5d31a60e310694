//! LinkBench request mixes: the default, the write-only mix of the DWB-FTL paper (an FTL that
//! separates the double-write buffer's stream), and mix files.
//!
//! A mix file has one `name = percent` per line; `#` starts a comment; blank lines are
//! ignored; names not given are 0; the percentages must add up to 100 (± 0.01).

use serde::Serialize;

use crate::error::ConfigError;

/// The ten request types, in LinkBench's mix order.
pub const REQUESTS: [&str; 10] = [
    "addlink",
    "deletelink",
    "updatelink",
    "countlink",
    "getlink",
    "getlinklist",
    "getnode",
    "addnode",
    "updatenode",
    "deletenode",
];

/// Transactions of the DWB-FTL paper's experiment.
pub const DWB_FTL_REQUESTS: u64 = 5_100_000;

/// Percent of requests per type, in [`REQUESTS`] order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkMix {
    /// Percentages.
    pub percent: [f64; 10],
}

impl LinkMix {
    /// LinkBench's default mix.
    pub const DEFAULT: LinkMix = LinkMix {
        percent: [
            8.9886601, 2.9907664, 8.0122125, 4.8863567, 0.5261142, 50.7119145, 12.9326683,
            2.5732789, 7.366437, 1.0115914,
        ],
    };

    /// The DWB-FTL paper's mix: writes only (all reads 0).
    pub const WRITE_ONLY: LinkMix = LinkMix {
        percent: [29.0, 10.0, 25.0, 0.0, 0.0, 0.0, 0.0, 9.0, 23.5, 3.5],
    };

    /// `default`, `write-only`, or the path of a mix file. `seed-001` (the reproduction's
    /// number for the DWB-FTL paper) is accepted for `write-only`.
    pub fn from_arg(arg: &str) -> Result<LinkMix, ConfigError> {
        match arg {
            "default" => Ok(LinkMix::DEFAULT),
            "write-only" | "seed-001" | "seed001" => Ok(LinkMix::WRITE_ONLY),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::Mix(format!(
                        "cannot read mix file {path}: {e}; give default, write-only or a file"
                    ))
                })?;
                LinkMix::parse(&text)
            }
        }
    }

    /// Parses a mix file.
    pub fn parse(text: &str) -> Result<LinkMix, ConfigError> {
        let mut percent = [0.0; 10];
        let mut seen = [false; 10];
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| ConfigError::MixParse { line, message };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let Some((name, value)) = content.split_once('=') else {
                return Err(err(format!("expected `name = percent`, found `{content}`")));
            };
            let name = name.trim();
            let value = value.trim();
            let Some(idx) = REQUESTS.iter().position(|r| r.eq_ignore_ascii_case(name)) else {
                return Err(err(format!(
                    "unknown request `{name}`; use one of {}",
                    REQUESTS.join(", ")
                )));
            };
            if seen[idx] {
                return Err(err(format!(
                    "`{name}` is given twice; keep one line for it"
                )));
            }
            let v: f64 = value.parse().map_err(|_| {
                err(format!(
                    "`{value}` is not a number; write a percentage such as 12.5"
                ))
            })?;
            if !v.is_finite() || !(0.0..=100.0).contains(&v) {
                return Err(err(format!("{name} = {value} is outside 0..=100")));
            }
            seen[idx] = true;
            percent[idx] = v;
        }
        let mix = LinkMix { percent };
        mix.validate()?;
        Ok(mix)
    }

    /// Checks that the percentages are in range and add up to 100.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self
            .percent
            .iter()
            .any(|p| !p.is_finite() || !(0.0..=100.0).contains(p))
        {
            return Err(ConfigError::Mix(
                "every percentage must be within 0..=100".to_string(),
            ));
        }
        let sum: f64 = self.percent.iter().sum();
        if (sum - 100.0).abs() > 0.01 {
            return Err(ConfigError::Mix(format!(
                "percentages add up to {sum}, not 100; adjust them so they sum to 100"
            )));
        }
        Ok(())
    }

    /// The mix as a file [`LinkMix::parse`] reads back.
    pub fn to_file(&self) -> String {
        REQUESTS
            .iter()
            .zip(self.percent)
            .map(|(n, p)| format!("{n} = {p}\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn builtin_mixes_are_valid() {
        LinkMix::DEFAULT.validate().unwrap();
        LinkMix::WRITE_ONLY.validate().unwrap();
        assert_eq!(
            LinkMix::from_arg("write-only").unwrap(),
            LinkMix::WRITE_ONLY
        );
        assert_eq!(LinkMix::from_arg("seed-001").unwrap(), LinkMix::WRITE_ONLY);
        assert_eq!(LinkMix::from_arg("default").unwrap(), LinkMix::DEFAULT);
        assert!(matches!(
            LinkMix::from_arg("/nonexistent/mix"),
            Err(ConfigError::Mix(_))
        ));
    }

    #[test]
    fn errors_carry_line_numbers() {
        let e = LinkMix::parse("# c\naddlink = 50\n\nbogus = 50\n").unwrap_err();
        assert!(matches!(e, ConfigError::MixParse { line: 4, .. }), "{e}");
        let e = LinkMix::parse("addlink = 50\naddlink = 50\n").unwrap_err();
        assert!(matches!(e, ConfigError::MixParse { line: 2, .. }), "{e}");
        let e = LinkMix::parse("addlink 100\n").unwrap_err();
        assert!(matches!(e, ConfigError::MixParse { line: 1, .. }), "{e}");
        let e = LinkMix::parse("addlink = lots\n").unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        let e = LinkMix::parse("addlink = -5\ngetnode = 105").unwrap_err();
        assert!(matches!(e, ConfigError::MixParse { line: 1, .. }), "{e}");
        let e = LinkMix::parse("addlink = 60\n").unwrap_err();
        assert!(
            matches!(e, ConfigError::Mix(_)) && e.to_string().contains("60"),
            "{e}"
        );
    }

    fn arb_mix() -> impl Strategy<Value = LinkMix> {
        proptest::collection::vec(0u32..1000, 10).prop_filter_map("all zero", |w| {
            let total: u32 = w.iter().sum();
            (total > 0).then(|| {
                let mut percent = [0.0; 10];
                for (p, x) in percent.iter_mut().zip(&w) {
                    *p = f64::from(*x) * 100.0 / f64::from(total);
                }
                LinkMix { percent }
            })
        })
    }

    proptest! {
        #[test]
        fn written_mixes_parse_back(
            mix in arb_mix(),
            pad in "[ \t]{0,3}",
            comment in proptest::option::of("[ a-z0-9=]{0,12}"),
            drop_zero in any::<bool>(),
        ) {
            let mut text = String::new();
            for (n, p) in REQUESTS.iter().zip(mix.percent) {
                if drop_zero && p == 0.0 {
                    continue;
                }
                text.push_str(&format!("{pad}{n}{pad}={pad}{p}{pad}"));
                if let Some(c) = &comment {
                    text.push_str(&format!("#{c}"));
                }
                text.push('\n');
                if comment.is_some() {
                    text.push_str("\n# a comment line\n");
                }
            }
            let parsed = LinkMix::parse(&text).unwrap();
            prop_assert_eq!(parsed, mix);
            prop_assert_eq!(LinkMix::parse(&mix.to_file()).unwrap(), mix);
        }

        #[test]
        fn a_bad_line_is_reported_where_it_is(
            mix in arb_mix(),
            at in 0usize..10,
            junk in "[a-z]{1,8}( [a-z]{1,8})?",
        ) {
            let mut lines: Vec<String> = mix.to_file().lines().map(str::to_string).collect();
            lines.insert(at, junk.clone());
            let e = LinkMix::parse(&lines.join("\n")).unwrap_err();
            prop_assert!(matches!(e, ConfigError::MixParse { line, .. } if line == at + 1), "{e}");
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,200}") {
            let _ = LinkMix::parse(&text);
        }
    }
}
