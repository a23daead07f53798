"""Plots drawn on the server as SVG (no script, no CDN, no inline style: the CSP allows neither;
SVG's presentation attributes are not CSS). Each plot says in its title what it shows, and the
page prints the same numbers as text beside it."""
from markupsafe import Markup, escape

W, H, PAD = 480, 160, 28


def _duration(ms: int) -> str:
    s = ms / 1000
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _frame(title: str, body: list[str], top: str) -> Markup:
    return Markup(f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{escape(title)}">'
                  f'<title>{escape(title)}</title>'
                  f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 4}" y2="{H - PAD}" stroke="#5b6670"/>'
                  f'<line x1="{PAD}" y1="6" x2="{PAD}" y2="{H - PAD}" stroke="#5b6670"/>'
                  f'<text x="{PAD + 4}" y="14" font-size="11" fill="#5b6670">{escape(top)}</text>'
                  f'<text x="{PAD}" y="{H - 8}" font-size="11" fill="#5b6670">24 h ago</text>'
                  f'<text x="{W - 4}" y="{H - 8}" font-size="11" fill="#5b6670" text-anchor="end">now</text>'
                  + "".join(body) + "</svg>")


def _x(i: int) -> float:
    return PAD + (W - PAD - 8) * (i + 0.5) / 24


def per_hour(hours: list[dict]) -> Markup:
    """Integrations per hour over the last day, as bars."""
    top = max([h["count"] for h in hours] + [1])
    bar = (W - PAD - 8) / 24 * 0.7
    body = []
    for i, h in enumerate(hours):
        height = (H - PAD - 20) * h["count"] / top
        if h["count"]:
            body.append(f'<rect x="{_x(i) - bar / 2:.1f}" y="{H - PAD - height:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                        f'fill="#1f5fbf"><title>{h["count"]} integrated</title></rect>')
    total = sum(h["count"] for h in hours)
    return _frame(f"Integrations per hour over the last day: {total} in all, at most {top} in an hour", body,
                  f"{top} an hour")


def proposal_to_integration(hours: list[dict]) -> Markup:
    """The median and p95 of the time from proposal to integration, hour by hour."""
    top = max([h["p95"] or 0 for h in hours] + [1000])
    body = []
    for key, colour, dash in (("p95", "#b42318", ' stroke-dasharray="4 3"'), ("median", "#1e7b34", "")):
        points = [(_x(i), H - PAD - (H - PAD - 20) * h[key] / top) for i, h in enumerate(hours) if h[key] is not None]
        if len(points) > 1:
            body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="'
                        + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>')
        body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in points]
    return _frame("Time from proposal to integration, median (green) and p95 (red, dashed), hour by hour over the "
                  f"last day; the top line is {_duration(top)}", body, _duration(top))


def duration(ms: int | None) -> str:
    return "-" if ms is None else _duration(ms)
