#!/usr/bin/env python3
"""Draws the main panels of Atoll's Grafana dashboard (charts/atoll/files/dashboard.json) from
the data a real Prometheus gathered while the alerts end-to-end test caused its faults
(target/alerts/run.json, written by crates/atoll-e2e/tests/alerts.rs), with the same queries and
legends, into a PNG for the README. Grafana itself is not installable from the registries here,
so matplotlib stands in for it.

Usage: hack/dashboard-png.py [RUN_JSON] [OUT_PNG]   (make dashboard-png)
"""
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/alerts/run.json")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs/dashboard-faults.png")

# The panels an operator looks at first during a member outage, in the dashboard's order.
PANELS = [
    "Heartbeat age by member",
    "Withdrawn members",
    "Leader per member",
    "Hub records rejected by member and reason",
    "Write errors and unpublishable objects",
    "API writes by kind and verb",
]


def legends():
    """The legendFormat of every query of the dashboard, by panel, in order."""
    with open(os.path.join(ROOT, "charts/atoll/files/dashboard.json")) as f:
        dashboard = json.load(f)
    return {p["title"]: [t.get("legendFormat", "") for t in p.get("targets", [])]
            for p in dashboard["panels"]}


def legend(fmt, labels):
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)
    # The e2e Prometheus names its jobs after the chart's Services plus the member.
    return text.replace("atoll-agent-metrics-", "agent ").replace("atoll-dns-", "dns ")


def main():
    with open(RUN) as f:
        run = json.load(f)
    start = run["start"]
    formats = legends()
    fig, axes = plt.subplots(3, 2, figsize=(15, 11), sharex=True)
    for ax, title in zip(axes.flat, PANELS):
        queries = run["panels"].get(title, [])
        for i, (expr, result) in enumerate(queries):
            fmt = formats.get(title, [""] * (i + 1))[i]
            for series in result:
                points = [(float(t) - start, float(v)) for t, v in series["values"]]
                if not points or all(v == 0 for _, v in points) and len(result) > 6:
                    continue  # a flat zero among many lines says nothing
                xs, ys = zip(*points)
                ax.plot(xs, ys, linewidth=1.2, label=legend(fmt, series["metric"]))
        for name, at in run.get("marks", []):
            ax.axvline(at - start, color="grey", linestyle=":", linewidth=0.8)
        ax.set_title(title, fontsize=11)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            # The lines that reach highest first; a legend of 26 lines hides the plot.
            ranked = sorted(zip(handles, labels), key=lambda hl: -max(hl[0].get_ydata()))
            shown = ranked[:8]
            more = len(ranked) - len(shown)
            ax.legend([h for h, _ in shown], [l for _, l in shown] + ([] if not more else []),
                      fontsize=7, loc="upper left", ncol=2,
                      title=f"(+{more} lower lines)" if more else None, title_fontsize=7)
    top = axes.flat[1]
    for name, at in run.get("marks", []):
        top.annotate(name, xy=(at - start, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                     fontsize=7, va="top", ha="right", color="dimgrey")
    for ax in axes[-1]:
        ax.set_xlabel("seconds since the first fault (local ClusterSet, 2 s heartbeats, 12 s grace)")
    fig.suptitle("Atoll dashboard during the alerts e2e run: forged record, failing hub write, "
                 "member c2's agent down, hub down", fontsize=12)
    fig.tight_layout()
    fig.savefig(OUT, dpi=80)
    print(f"{OUT}: {len(PANELS)} panels, {run['end'] - start} s of data")


if __name__ == "__main__":
    main()
