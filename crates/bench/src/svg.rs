//! Charts as SVG text: a step chart of ready pods over time, one line per run, so rollouts of both sides
//! can be compared by eye, and a line chart of memory against pods (the scale scenario). Written by
//! hand: a handful of elements do not justify a plotting dependency.

use std::fmt::Write;

/// One line of the chart.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub label: String,
    /// A CSS colour.
    pub color: String,
    /// Dashed lines tell rounds of the same side apart.
    pub dashed: bool,
    /// (x, value) in x order; in a step chart the value holds until the next point.
    pub points: Vec<(f64, f64)>,
    /// A dot on every point: measured values, told apart from a fitted line.
    pub markers: bool,
}

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// The step chart as a standalone SVG document.
pub(crate) fn step_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    chart(title, x_label, y_label, series, true)
}

/// The same axes with straight lines from point to point.
pub(crate) fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    chart(title, x_label, y_label, series, false)
}

fn chart(title: &str, x_label: &str, y_label: &str, series: &[Series], step: bool) -> String {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_max = nice_ceiling(points().map(|p| p.0).fold(0.0, f64::max));
    let y_max = nice_ceiling(points().map(|p| p.1).fold(0.0, f64::max));
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/><text x="{LEFT}" y="22" font-size="15">{}</text>"#,
        escape(title)
    );
    // Grid and tick labels, five steps per axis.
    for i in 0..=5 {
        let fraction = f64::from(i) / 5.0;
        let (xv, yv) = (fraction * x_max, fraction * y_max);
        let _ = writeln!(
            svg,
            r##"<line x1="{x0:.1}" y1="{top}" x2="{x0:.1}" y2="{bottom}" stroke="#ddd"/><text x="{x0:.1}" y="{label_y}" text-anchor="middle">{}</text>"##,
            format_tick(xv),
            x0 = x(xv),
            top = TOP,
            bottom = TOP + plot_h,
            label_y = TOP + plot_h + 16.0,
        );
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y0:.1}" x2="{right}" y2="{y0:.1}" stroke="#ddd"/><text x="{label_x}" y="{ty:.1}" text-anchor="end">{}</text>"##,
            format_tick(yv),
            y0 = y(yv),
            right = LEFT + plot_w,
            label_x = LEFT - 6.0,
            ty = y(yv) + 4.0,
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{cx}" y="{by}" text-anchor="middle">{}</text><text transform="translate(16 {cy}) rotate(-90)" text-anchor="middle">{}</text>"#,
        escape(x_label),
        escape(y_label),
        cx = LEFT + plot_w / 2.0,
        by = HEIGHT - 12.0,
        cy = TOP + plot_h / 2.0,
    );
    for (index, line) in series.iter().enumerate() {
        let mut path = String::new();
        let mut previous: Option<f64> = None;
        for &(t, v) in &line.points {
            match previous {
                None => {
                    let _ = write!(path, "{:.1},{:.1}", x(t), y(v));
                }
                // A step: hold the old value until this point's time, then jump.
                Some(old) if step => {
                    let _ = write!(path, " {:.1},{:.1} {:.1},{:.1}", x(t), y(old), x(t), y(v));
                }
                Some(_) => {
                    let _ = write!(path, " {:.1},{:.1}", x(t), y(v));
                }
            }
            previous = Some(v);
        }
        let dash = if line.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let color = escape(&line.color);
        if !path.is_empty() {
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{path}"/>"#
            );
        }
        if line.markers {
            for &(t, v) in &line.points {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/>"#,
                    x(t),
                    y(v)
                );
            }
        }
        let legend_y = TOP + 10.0 + index as f64 * 18.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{legend_y}" x2="{lx2}" y2="{legend_y}" stroke="{color}" stroke-width="2"{dash}/><text x="{tx}" y="{ty}">{}</text>"#,
            escape(&line.label),
            lx = LEFT + plot_w + 12.0,
            lx2 = LEFT + plot_w + 40.0,
            tx = LEFT + plot_w + 46.0,
            ty = legend_y + 4.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `value` (1 for nothing).
fn nice_ceiling(value: f64) -> f64 {
    if !value.is_finite() || value <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= value)
        .unwrap_or(10.0 * power)
}

fn format_tick(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(label: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            color: "#1f77b4".into(),
            dashed: false,
            points,
            markers: false,
        }
    }

    #[test]
    fn draws_steps_scaled_to_the_axes() {
        let svg = step_chart(
            "scale-up <20 pods>",
            "seconds",
            "ready pods",
            &[series(
                "mini-kcm r1",
                vec![(0.0, 0.0), (4.0, 10.0), (8.0, 20.0)],
            )],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("scale-up &lt;20 pods&gt;"));
        assert!(svg.contains("mini-kcm r1"));
        // x: 0..10 s over 530 px from 70; y: 0..20 pods over 350 px from 390 up.
        assert!(
            svg.contains(r#"points="70.0,390.0 282.0,390.0 282.0,215.0 494.0,215.0 494.0,40.0""#),
            "{svg}"
        );
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn empty_series_still_make_a_valid_document() {
        let svg = step_chart("t", "x", "y", &[series("nothing", vec![])]);
        assert!(!svg.contains("<polyline"));
        assert!(svg.contains("nothing"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn a_line_chart_joins_points_straight_and_marks_them() {
        let mut measured = series("mini-kcm", vec![(0.0, 0.0), (5.0, 10.0), (10.0, 20.0)]);
        measured.markers = true;
        let svg = line_chart("memory", "pods", "MiB", &[measured]);
        assert!(
            svg.contains(r#"points="70.0,390.0 335.0,215.0 600.0,40.0""#),
            "{svg}"
        );
        assert_eq!(svg.matches("<circle").count(), 3);
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(8.0), 10.0);
        assert_eq!(nice_ceiling(20.0), 20.0);
        assert_eq!(nice_ceiling(21.0), 25.0);
        assert_eq!(nice_ceiling(480.0), 500.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }
}
