#!/usr/bin/env python3
"""bench/RESULTS.md and one PNG per scenario from bench/run.sh's results.

Usage: bench/report.py RESULTS_DIR OUT_DIR

RESULTS_DIR holds SCENARIO.tsv (scenario, measure, runs, median_s, min_s,
max_s, peak_rss_kib, note; the row "input" holds layers, uncompressed and
compressed bytes, when the scenario started and at which commit, and the
row "skipped" the reason, "docker-skipped" why the Docker rows were not
run) and machine.tsv.
verify-bytes and verify-gates are imgverify's own runs split by its report
(the byte pass, the other gates); results written before them lack them,
and their rows and ratios are left out.  Results written before
verify-full (imgverify --full) have no such row: their imgverify then
inflated every layer, so their verify rows are read as verify-full ones.  The
hand-written analysis, bench/notes.md, is appended as it is.  Targets are
the issue's; a ratio is computed only from figures of the same run."""
import os
import sys

TARGETS = [
    # (label, numerator, denominator, comparison, bound, how to read)
    ("cold build / (inflate + SHA-256 pass, 2 cores)", "cold", "limit", "<=", 1.25, "time ratio"),
    ("warm build / umoci insert", "warm", "umoci", "<=", 2.0, "time ratio"),
    ("docker build (base loaded) / warm build", "docker", "warm", ">=", 10.0, "speed-up"),
    ("sha256sum of the blobs (2 cores) / imgverify", "sha256sum", "verify", ">=", 0.8,
     "speed of imgverify vs sha256sum (layers this store read before: hashed, diff_ids as read)"),
    ("sha256sum of the blobs (2 cores) / imgverify --full", "sha256sum", "verify-full", ">=", 0.8,
     "speed of imgverify inflating every layer again (a store that never read them) vs sha256sum"),
    ("sha256sum of the blobs (2 cores) / imgverify's byte pass", "sha256sum", "verify-bytes", ">=", 0.8,
     "speed of imgverify's blob, diff_id and entry checks alone vs sha256sum, the gates apart"),
    ("openssl sha256 of the blobs (2 cores) / imgverify", "openssl-sha256", "verify", ">=", 0.8,
     "speed of imgverify vs OpenSSL's SHA-256, the stricter peer"),
    ("skopeo copy to an empty registry / imgbuild push (new base)", "push-new-skopeo", "push-new-imgbuild", ">=", 0.8,
     "speed of imgbuild vs skopeo (imgbuild's figure includes a warm build)"),
    ("imgbuild thin push / skopeo copy, base present", "push-thin-imgbuild", "push-thin-skopeo", "<=", 2.0,
     "time ratio (imgbuild's figure includes a warm build)"),
    # issue 46: against the limit with OpenSSL's SHA-256, which imgbuild itself uses
    ("cold build / (inflate + OpenSSL SHA-256 pass, 2 cores)", "cold", "limit-openssl", "<=", 1.25,
     "issue 46: the limit with the SHA-256 imgbuild uses"),
    ("imgverify, a store of its own / (inflate + OpenSSL SHA-256 pass, 2 cores)", "verify-fresh", "limit-openssl",
     "<=", 1.25, "issue 46: every layer read once for every gate"),
]
# Ratios that explain a target rather than set one: (label, numerator, denominator, how to read).
# A denominator that is a tuple is the sum of those figures.
CONTEXT = [
    ("imgverify --full's byte pass / (inflate + OpenSSL SHA-256 pass of the base, 2 cores)", "verify-full-bytes",
     "limit-openssl", "the full byte pass against its real floor: one inflate and both digests of every layer"),
    ("imgverify --full's byte pass / igzip -dc of the layers alone", "verify-full-bytes", "inflate",
     "how far the byte pass is above its floor: one layer's gzip stream inflates on one core"),
    ("imgbuild cold build from the registry / (skopeo pull + imgbuild cold build from the layout)",
     "pull-cold-imgbuild", ("pull-skopeo", "cold"),
     "below 1: the base is listed while it downloads, not after"),
    ("imgbuild cold build from the registry / imgbuild cold build from the layout", "pull-cold-imgbuild", "cold",
     "what the download adds to a cold build"),
]
ORDER = ["limit", "limit-openssl", "cold", "warm", "umoci", "docker-load", "docker", "skopeo", "verify", "verify-bytes",
         "verify-gates", "verify-full", "verify-full-bytes", "verify-full-gates", "sha256sum", "openssl-sha256",
         "inflate", "push-new-imgbuild", "push-new-skopeo", "push-new-docker",
         "push-thin-imgbuild", "push-thin-skopeo", "push-thin-docker", "pull-cold-imgbuild", "pull-skopeo",
         "verify-fresh", "kernels-json", "jit-budget-cold", "jit-budget-warm"]
OURS = {"cold", "warm", "verify", "verify-bytes", "verify-gates", "verify-full", "verify-full-bytes",
        "verify-full-gates", "push-new-imgbuild", "push-thin-imgbuild",
        "pull-cold-imgbuild", "verify-fresh", "kernels-json", "jit-budget-cold", "jit-budget-warm"}


def load(res):
    scen = {}
    for f in sorted(os.listdir(res)):
        if not f.endswith(".tsv") or f == "machine.tsv":
            continue
        rows = {}
        for line in open(os.path.join(res, f)):
            p = line.rstrip("\n").split("\t")
            if len(p) >= 7:
                rows[p[1]] = p
        if "verify" in rows and "verify-full" not in rows:
            for old in ("verify", "verify-bytes", "verify-gates"):
                if old in rows:
                    rows[old.replace("verify", "verify-full", 1)] = rows.pop(old)
        scen[f[:-4]] = rows
    machine = {}
    if os.path.exists(os.path.join(res, "machine.tsv")):
        for line in open(os.path.join(res, "machine.tsv")):
            p = line.rstrip("\n").split("\t")
            machine[p[0]] = p[1:]
    return scen, machine


def secs(v):
    """Seconds as read: milliseconds below one second (a warm build and an
    umoci insert are tens of them), hundredths above."""
    v = float(v)
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def own_mib(p):
    """The program's own peak RSS (its report's `resources`), the 9th
    field; "-" for the peers and for results written before it existed."""
    if len(p) > 8 and p[8] not in ("", "-"):
        return f"{int(float(p[8])) / 1024:.1f}"
    return "-"


def sort_key(name):
    if name.startswith("gen"):
        return (2, int(name[3:].lstrip(":") or 0))
    return (0 if name == "real" else 1, 0)


def plot(name, rows, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ms = [m for m in ORDER if m in rows]
    if not ms:
        return None
    secs = [float(rows[m][3]) for m in ms]
    rss = [int(rows[m][6]) / 1024 for m in ms]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.5))
    colors = ["tab:blue" if m in OURS else ("tab:gray" if m.startswith("limit") else "tab:orange") for m in ms]
    a.barh(ms, secs, color=colors)
    a.set_xscale("log")
    a.invert_yaxis()
    a.set_xlabel("seconds, median (log)")
    a.set_title(f"{name}: time (blue imgbuild, orange peers, gray limit)")
    for i, s in enumerate(secs):
        a.text(s, i, f" {s:.2f}", va="center", fontsize=8)
    b.barh(ms, rss, color=colors)
    b.axvline(64, color="red", linestyle="--", label="target 64 MiB")
    b.invert_yaxis()
    b.set_xscale("log")
    b.set_xlabel("peak RSS, MiB (log)")
    b.legend()
    b.set_title("peak RSS")
    fig.tight_layout()
    path = os.path.join(out, f"bench-{name.replace(':', '')}.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return os.path.basename(path)


def main():
    res, out = sys.argv[1], sys.argv[2]
    scen, machine = load(res)
    md = ["# Benchmark results", "",
          "Written by `make bench` (bench/run.sh, then bench/report.py); the analysis at the end is",
          "bench/notes.md.  Every figure is the median of the runs counted beside it, all taken in one",
          "run on the same input; ratios compare figures of that same run.  Nothing here is asserted",
          "by a test.", ""]
    if machine:
        md += ["| | |", "| --- | --- |"]
        for k, v in machine.items():
            md.append(f"| {k} | {' '.join(v)} |")
        md.append("")
    for name in sorted(scen, key=sort_key):
        rows = scen[name]
        md.append(f"## Scenario `{name}`")
        md.append("")
        if "skipped" in rows:
            md += [f"**Not run on this machine**: {rows['skipped'][7]}.", ""]
            continue
        if "input" in rows:
            p = rows["input"]
            # The commit measured: each scenario may come from another run
            # than the one the header describes (results before it lack it).
            at = f" at commit {p[8]}" if len(p) > 8 and p[8] else ""
            md += [f"Base: {p[2]} layer(s), {int(p[3]) / 2**30:.2f} GiB uncompressed, "
                   f"{int(p[4]) / 2**30:.2f} GiB compressed (started {p[7]}{at}).", ""]
        if "docker-skipped" in rows:
            md += [f"Docker rows not run: {rows['docker-skipped'][7]}.", ""]
        md += ["| measure | runs | median s | min s | max s | peak RSS MiB | own RSS MiB | what |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for m in ORDER:
            if m in rows:
                p = rows[m]
                what = p[7].replace("|", "\\|")
                md.append(f"| {m} | {p[2]} | {secs(p[3])} | {secs(p[4])} | {secs(p[5])} | "
                          f"{int(p[6]) / 1024:.1f} | {own_mib(p)} | {what} |")
        md += ["", "| target (issue 18, unless named) | figure | bound | met |", "| --- | ---: | ---: | --- |"]
        for label, a, b, cmp, bound, how in TARGETS:
            if a in rows and b in rows and float(rows[b][3]) > 0:
                v = float(rows[a][3]) / float(rows[b][3])
                ok = v <= bound if cmp == "<=" else v >= bound
                md.append(f"| {label} ({how}) | {v:.2f} | {cmp} {bound} | {'yes' if ok else '**no**'} |")
        for label, a, b, how in CONTEXT:
            parts = b if isinstance(b, tuple) else (b,)
            if a in rows and all(m in rows for m in parts):
                total = sum(float(rows[m][3]) for m in parts)
                if total > 0:
                    md.append(f"| {label} ({how}) | {float(rows[a][3]) / total:.2f} | - | - |")
        ours = [m for m in OURS if m in rows]
        if ours:
            worst = max(int(rows[m][6]) for m in ours) / 1024
            md.append(f"| peak RSS of imgbuild/imgverify with the programs they run, every command "
                      f"| {worst:.1f} MiB | <= 64 | {'yes' if worst <= 64 else '**no**'} |")
            own = [float(own_mib(rows[m])) for m in ours if own_mib(rows[m]) != "-"]
            if own:
                md.append(f"| peak RSS of imgbuild/imgverify themselves (their report's `resources`), every command "
                          f"| {max(own):.1f} MiB | <= 64 | {'yes' if max(own) <= 64 else '**no**'} |")
        png = plot(name, rows, out)
        if png:
            md += ["", f"![{name}]({png})"]
        md.append("")
    warm = {n: float(r["warm"][3]) for n, r in scen.items() if "warm" in r}
    if len(warm) > 1:
        small = min(warm, key=lambda n: int(scen[n]["input"][3]) if "input" in scen[n] else 0)
        big = max(warm, key=lambda n: int(scen[n]["input"][3]) if "input" in scen[n] else 0)
        md += ["## Warm build across base sizes", "",
               f"warm `{big}` / warm `{small}`: {warm[big] / warm[small]:.2f} (target <= 1.2 for 30 GB / 1 GB)", ""]
    notes = os.path.join(out, "notes.md")
    if os.path.exists(notes):
        md += [open(notes).read()]
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
