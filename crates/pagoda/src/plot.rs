//! SVG charts of a reproduction: lines (a value against a swept parameter) and grouped bars
//! (configurations side by side), drawn with `plotters`' SVG backend (no font files needed).

use crate::error::{CliError, CliResult};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// One line of a line chart.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed: a prediction or a model, beside measured (solid) lines.
    pub dashed: bool,
    /// Palette index: a prediction takes the colour of what it predicts.
    pub color: usize,
}

/// A line chart: several series against one x axis.
#[derive(Debug)]
pub(crate) struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Logarithmic y axis (series that differ by orders of magnitude on one chart).
    pub log_y: bool,
}

const SIZE: (u32, u32) = (760, 460);

fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

fn plot_err(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Other(format!("cannot draw {}: {e}", path.display()))
}

/// Range of the values with a little room, never empty.
fn padded(lo: f64, hi: f64, from_zero: bool, headroom: f64) -> (f64, f64) {
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let span = (hi - lo).abs().max(hi.abs() * 1e-3).max(1e-9);
    (
        if from_zero && lo >= 0.0 {
            0.0
        } else {
            lo - 0.05 * span
        },
        hi + headroom * span,
    )
}

/// Draws a line chart as SVG. Points are drawn as well as lines so that a series of one point
/// still shows.
pub(crate) fn line_chart(path: &Path, c: &LineChart) -> CliResult<()> {
    let pts = c.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(plot_err(path, "no points to plot"));
    }
    let (x0, x1) = padded(x0, x1, false, 0.05);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72);
    if c.log_y {
        let y0 = c
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|&y| y > 0.0)
            .fold(f64::MAX, f64::min);
        let y0 = if y0 == f64::MAX { 1.0 } else { y0 / 1.5 };
        let chart = builder
            .build_cartesian_2d(x0..x1, (y0..y1.max(y0) * 6.0).log_scale())
            .map_err(|e| plot_err(path, e))?;
        draw_lines(chart, path, c)?;
    } else {
        // Room at the top for the legend, above the data.
        let (y0, y1) = padded(0.0, y1, true, 0.3);
        let chart = builder
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| plot_err(path, e))?;
        draw_lines(chart, path, c)?;
    }
    root.present().map_err(|e| plot_err(path, e))
}

/// Draws the mesh, the series and the legend on a built chart (linear or log y).
fn draw_lines<'b, Y>(
    mut chart: ChartContext<
        'b,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    path: &Path,
    c: &LineChart,
) -> CliResult<()>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(c.x_label)
        .y_desc(c.y_label)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .y_label_formatter(&|v| short_number(*v))
        .x_label_formatter(&|v| short_number(*v))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for s in c.series {
        let color = palette(s.color);
        let style = ShapeStyle::from(color).stroke_width(2);
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 6, 4, style))
                .map_err(|e| plot_err(path, e))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))
                .map_err(|e| plot_err(path, e))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| plot_err(path, e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    Ok(())
}

/// A grouped bar chart: one group per category, one bar per series in each group.
#[derive(Debug)]
pub(crate) struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub categories: &'a [String],
    /// (series name, one value per category).
    pub series: &'a [(String, Vec<f64>)],
}

/// Draws a grouped bar chart as SVG, each bar labelled with its value.
pub(crate) fn bar_chart(path: &Path, c: &BarChart) -> CliResult<()> {
    let n_cat = c.categories.len();
    let n_ser = c.series.len().max(1);
    if n_cat == 0 {
        return Err(plot_err(path, "no categories to plot"));
    }
    let y_max = c
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max);
    // Room above the tallest bar for the legend, one line per series.
    let (_, y1) = padded(0.0, y_max, true, 0.1 + 0.12 * n_ser as f64);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..n_cat as f64, 0.0..y1)
        .map_err(|e| plot_err(path, e))?;
    let cats = c.categories.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n_cat * 2 + 1)
        .x_label_formatter(&|x| {
            // Label only the middle of each group.
            let i = x.floor();
            if (x - i - 0.5).abs() < 1e-6 && (i as usize) < cats.len() {
                cats[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(c.y_label)
        .y_label_formatter(&|v| short_number(*v))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    let group = 0.8;
    let width = group / n_ser as f64;
    for (si, (name, values)) in c.series.iter().enumerate() {
        let color = palette(si);
        let bars = values.iter().enumerate().map(move |(ci, &v)| {
            let x = ci as f64 + (1.0 - group) / 2.0 + si as f64 * width;
            Rectangle::new([(x, 0.0), (x + width * 0.92, v)], color.filled())
        });
        chart
            .draw_series(bars)
            .map_err(|e| plot_err(path, e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        let labels = values.iter().enumerate().map(move |(ci, &v)| {
            let x = ci as f64 + (1.0 - group) / 2.0 + (si as f64 + 0.1) * width;
            let style = TextStyle::from(("sans-serif", 11).into_font())
                .pos(Pos::new(HPos::Left, VPos::Bottom));
            Text::new(short_number(v), (x, v), style)
        });
        chart.draw_series(labels).map_err(|e| plot_err(path, e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    root.present().map_err(|e| plot_err(path, e))
}

/// 1234567 -> "1.23M", 0.25 -> "0.25": axis labels that stay short.
pub(crate) fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
    .replace(".000", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_their_labels() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.svg");
        let s = [
            Series {
                name: "measured".into(),
                points: vec![(1.0, 10.0), (2.0, 30.0)],
                dashed: false,
                color: 0,
            },
            Series {
                name: "model".into(),
                points: vec![(1.0, 12.0), (2.0, 28.0)],
                dashed: true,
                color: 0,
            },
        ];
        line_chart(
            &p,
            &LineChart {
                title: "TPS vs buffer",
                x_label: "buffer (MiB)",
                y_label: "TPS",
                series: &s,
                log_y: false,
            },
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for want in ["<svg", "TPS vs buffer", "buffer (MiB)", "measured", "model"] {
            assert!(svg.contains(want), "{want}");
        }
        let p = dir.path().join("b.svg");
        bar_chart(
            &p,
            &BarChart {
                title: "tpmC",
                y_label: "tpmC",
                categories: &["ssd".into(), "hdd".into()],
                series: &[("original".into(), vec![100.0, 50.0])],
            },
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("original") && svg.contains("hdd"), "{svg}");
        assert!(line_chart(
            &dir.path().join("e.svg"),
            &LineChart {
                title: "",
                x_label: "",
                y_label: "",
                series: &[],
                log_y: true,
            }
        )
        .is_err());
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1_234_567.0), "1.235M");
        assert_eq!(short_number(12_345.0), "12.3k");
        assert_eq!(short_number(0.25), "0.250");
        assert_eq!(short_number(2_000_000.0), "2M");
    }
}
