"""Trains a small character-level transformer three times and compares the loss curves: the
end-to-end check that flashlab's attention, forward and backward, can replace torch's.

  run "sdpa"            torch's scaled_dot_product_attention
  run "flashlab"        flashlab.torch.attention: the same initial weights, the same batches
  run "sdpa_reordered"  torch's attention again, batches drawn in another order: how far two
                        runs that are both right drift apart (the run-to-run noise)

The text is the lessons' own: lessons/*/README.md, read now, concatenated in sorted order;
the vocabulary is every character in it; the last --val-fraction of it is held out. The
model trains in bf16 autocast (fp32 weights and AdamW state, bf16 matrix products, so the
attention sees bf16 q, k, v as flashlab's kernels require).

The cost, by default (4 layers, d_model = 512, H = 4 heads of d = 128, N = 256, B = 32):
12.6 M weights in the matrix products, so a step of B N = 8192 characters is about
6 x 12.6e6 x 8192 = 0.62 TFLOP, plus the causal attention's 3.5 x 4 B H N^2 d / 2 = 7.5 GFLOP
per layer; 300 steps of three runs, about 0.6 PFLOP: seconds of an H200's matrix units. At
this size a step may be bound by kernel launches more than by FLOPs, and attention is about
5% of them, so tokens per second compares the two attentions only roughly.

The check: each training curve is smoothed by a centred mean over --smooth steps; the
flashlab curve must stay as close to the sdpa curve as the reordered run does, in its
largest gap and in its mean gap, every loss must be finite, and every run must end below the
unigram entropy of the text (what a model that ignores context would score).

  python3 train_char_model.py --out train-out              # needs torch, a CUDA GPU and
                                                           # flashlab's module (--flashlab-path)
  python3 train_char_model.py --plot-from train-out/losses.csv   # the plot alone; no torch

Writes losses.csv (step, then train_<run> and val_<run> per run; val every --eval-every
steps), summary.json (final losses, the gaps, the noise band, tokens per second) and
loss_curves.png (when matplotlib is importable). Exit status: 0 PASS (or skipped with
--skip-if-unavailable), 1 FAIL, 2 bad arguments or input files, 3 torch, a GPU or
flashlab's module missing (with --plot-from: matplotlib).
"""
import argparse
import copy
import csv
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNS = ("sdpa", "flashlab", "sdpa_reordered")
REFERENCE, CANDIDATE, NOISE = RUNS
EXIT_FAIL, EXIT_USAGE, EXIT_MISSING = 1, 2, 3


# ---------------------------------------------------------------------------------------------
# The text and its vocabulary (no torch needed)

def load_corpus(lessons_dir):
    """The lessons' README.md files (lessons/*/README.md), concatenated in sorted order."""
    files = sorted(Path(lessons_dir).glob("*/README.md"))
    if not files:
        raise ValueError(f"no lesson texts under {lessons_dir}: expected "
                         f"{lessons_dir}/*/README.md (pass --lessons <repository>/lessons)")
    return "".join(f.read_text(encoding="utf-8") for f in files), files


class Vocabulary:
    """Every distinct character of the text, sorted; a character's id is its index."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        unknown = sorted(set(text) - self.ids.keys())
        if unknown:
            raise ValueError(f"characters {unknown!r} are not in the vocabulary of "
                             f"{len(self.chars)} characters built from the lessons")
        return [self.ids[c] for c in text]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


def unigram_entropy(ids):
    """The cross-entropy, in nats per character, of a model that knows each character's
    frequency and nothing else: a run whose loss ends below it has learned from context."""
    counts = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    return -sum(c / len(ids) * math.log(c / len(ids)) for c in counts.values())


def split_tail(ids, val_fraction, context):
    """(train, val): val is the last val_fraction of ids. Each part must hold at least one
    window of context + 1 characters (context inputs, each with its next character)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"--val-fraction {val_fraction} must lie strictly between 0 and 1")
    n_val = int(len(ids) * val_fraction)
    train, val = ids[:len(ids) - n_val], ids[len(ids) - n_val:]
    for name, part in (("training part", train), ("held-out tail", val)):
        if len(part) < context + 1:
            raise ValueError(f"the {name} holds {len(part)} characters, fewer than context + 1 = "
                             f"{context + 1}: lower --context or change --val-fraction")
    return train, val


# ---------------------------------------------------------------------------------------------
# Comparing the curves (no torch needed)

def centered_mean(values, window):
    """values[i] replaced by the mean of the values within window // 2 steps of step i (fewer
    at the two ends). Centred, so a falling curve is not shifted to later steps."""
    prefix = [0.0]
    for x in values:
        prefix.append(prefix[-1] + x)
    half, n = window // 2, len(values)
    spans = ((max(0, i - half), min(n, i + half + 1)) for i in range(n))
    return [(prefix[hi] - prefix[lo]) / (hi - lo) for lo, hi in spans]


def compare(train, window, baseline):
    """train: run name -> loss per step. The gaps between the smoothed curves of flashlab and
    of sdpa, against the noise band (the gaps between sdpa and the reordered run). A run has
    learned when its smoothed loss ends below baseline (the unigram entropy): without that
    check, runs that learn nothing would agree trivially."""
    finite = all(math.isfinite(x) for run in RUNS for x in train[run])
    smooth = {run: centered_mean(train[run], window) for run in RUNS}
    gap = [abs(a - b) for a, b in zip(smooth[REFERENCE], smooth[CANDIDATE])]
    band = [abs(a - b) for a, b in zip(smooth[REFERENCE], smooth[NOISE])]
    learned = {run: smooth[run][-1] < baseline for run in RUNS}
    result = {
        "smoothing_window": window,
        "max_abs_difference": max(gap), "noise_band_max": max(band),
        "mean_abs_difference": sum(gap) / len(gap), "noise_band_mean": sum(band) / len(band),
        "first_step_difference": abs(train[REFERENCE][0] - train[CANDIDATE][0]),
        "all_finite": finite, "unigram_entropy": baseline, "learned": learned,
    }
    # Written so that a NaN anywhere makes it False.
    result["pass"] = bool(finite and all(learned.values())
                          and result["max_abs_difference"] <= result["noise_band_max"]
                          and result["mean_abs_difference"] <= result["noise_band_mean"])
    return result


# ---------------------------------------------------------------------------------------------
# The CSV and the plot (no torch needed)

def write_csv(path, train, val):
    """train: run -> loss per step (step 0, 1, ...); val: run -> {step: loss}."""
    runs = list(train)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["step"] + [f"train_{r}" for r in runs] + [f"val_{r}" for r in runs])
        for step in range(len(train[runs[0]])):
            out.writerow([step] + [repr(float(train[r][step])) for r in runs] +
                         [repr(float(val[r][step])) if step in val[r] else "" for r in runs])


def read_csv(path):
    """The inverse of write_csv: (train, val)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "step" not in rows[0]:
        raise ValueError(f"{path} holds no loss rows: expected the losses.csv a training run "
                         f"writes (columns step, train_<run>..., val_<run>...)")
    runs = [c[len("train_"):] for c in rows[0] if c.startswith("train_")]
    train = {r: [float(row[f"train_{r}"]) for row in rows] for r in runs}
    val = {r: {int(row["step"]): float(row[f"val_{r}"]) for row in rows if row[f"val_{r}"]}
           for r in runs}
    return train, val


def plot(csv_path, png_path, window):
    """Above, the training curves (raw, faint; smoothed, solid) and the held-out loss (dashed),
    one colour per run; below, each smoothed curve's gap to sdpa's. False, with a message,
    when matplotlib is not importable."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not importable: no plot; the curves are in {csv_path}")
        return False
    train, val = read_csv(csv_path)
    smooth = {run: centered_mean(train[run], window) for run in train}
    fig, (ax, ax_gap) = plt.subplots(2, 1, figsize=(9, 8), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 1]})
    for run, color in zip(train, ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        ax.plot(train[run], color=color, alpha=0.25, linewidth=0.8)
        ax.plot(smooth[run], color=color, label=f"{run}: train")
        steps = sorted(val[run])
        ax.plot(steps, [val[run][s] for s in steps], "--o", color=color, markersize=3,
                label=f"{run}: held-out")
        if run != REFERENCE and REFERENCE in smooth:
            ax_gap.plot([abs(a - b) for a, b in zip(smooth[run], smooth[REFERENCE])],
                        color=color, label=f"|{run} - {REFERENCE}|")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title(f"Character model on the lessons' text (train smoothed over {window} steps)")
    ax.legend()
    ax_gap.set_xlabel("step")
    ax_gap.set_ylabel("gap, smoothed")
    ax_gap.legend()
    fig.savefig(png_path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"plot: {png_path}")
    return True


# ---------------------------------------------------------------------------------------------
# Training (torch from here on, imported only once it is known to be there)

def missing_requirement():
    """None when torch and a CUDA GPU are present; else what is missing."""
    try:
        import torch
    except ImportError as e:
        return f"torch is not installed ({e}); this example trains on a CUDA GPU with PyTorch"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to torch (torch.cuda.is_available() is False)"
    return None


def flashlab_attention(path, heads, kv_heads, d):
    """flashlab.torch.attention, causal, after one small call that lets the library itself
    say whether it takes this head dimension and head grouping."""
    import torch
    sys.path.insert(0, str(path))
    try:
        import flashlab.torch as ft
    except ImportError as e:
        print(f"cannot train: flashlab's Python module was not found under {path} ({e}); build "
              f"it with CMake and pass --flashlab-path <build>/python", file=sys.stderr)
        raise SystemExit(EXIT_MISSING)
    q = torch.randn(1, heads, 17, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, kv_heads, 17, d, device="cuda", dtype=torch.bfloat16)
    try:
        ft.attention(q, k, k, causal=True)
    except (ValueError, TypeError) as e:
        print(f"cannot train: flashlab's attention refuses this model's shape: {e}",
              file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    except RuntimeError as e:  # its GPU library not found, or a fault in a kernel
        print(f"FAIL: flashlab's attention failed on a first small call: {e}", file=sys.stderr)
        raise SystemExit(EXIT_FAIL)
    return lambda q, k, v: ft.attention(q, k, v, causal=True)


def train_run(model, train_ids, val_ids, args, data_seed):
    """Trains model in place; returns (train loss per step, {step: held-out loss}, tokens/s)."""
    import torch
    gen = torch.Generator().manual_seed(data_seed)  # the batch order: the same seed, the same
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / args.warmup))
    offsets = torch.arange(args.context + 1, device="cuda")  # (N + 1,)
    # The held-out tail cut into consecutive windows, all scored at every evaluation.
    val_windows = val_ids.unfold(0, args.context + 1, args.context)  # (n_val, N + 1)
    train_losses, val_losses, seconds = [], {}, 0.0
    for step in range(args.steps):
        starts = torch.randint(len(train_ids) - args.context, (args.batch,), generator=gen)
        batch = train_ids[starts.cuda()[:, None] + offsets]  # (B, N + 1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch[:, :-1], batch[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        warmup.step()
        torch.cuda.synchronize()
        if step >= args.timing_warmup:  # the first steps pay for allocation and autotuning
            seconds += time.perf_counter() - t0
        train_losses.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps - 1:
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                val_losses[step] = model(val_windows[:, :-1], val_windows[:, 1:]).item()
            model.train()
            print(f"  step {step:4d}  train {train_losses[-1]:.4f}  "
                  f"held-out {val_losses[step]:.4f}")
    tokens = (args.steps - args.timing_warmup) * args.batch * args.context
    return train_losses, val_losses, tokens / seconds


def train_all(args, vocab, train_part, val_part):
    import torch
    sys.path.insert(0, str(Path(__file__).parent))  # char_transformer.py sits beside this file
    from char_transformer import CharTransformer, sdpa_attention
    d = args.d_model // args.heads
    attention = {"sdpa": sdpa_attention(args.kv_heads != args.heads),
                 "flashlab": flashlab_attention(args.flashlab_path, args.heads, args.kv_heads, d)}
    attention["sdpa_reordered"] = attention["sdpa"]
    data_seed = {"sdpa": args.data_seed, "flashlab": args.data_seed,
                 "sdpa_reordered": args.data_seed + 1}
    shape = (len(vocab), args.context, args.d_model, args.layers, args.heads, args.kv_heads)
    torch.manual_seed(args.seed)
    initial = copy.deepcopy(CharTransformer(*shape, attention["sdpa"]).state_dict())
    train_ids = torch.tensor(train_part, device="cuda")
    val_ids = torch.tensor(val_part, device="cuda")
    train, val, tokens_per_s = {}, {}, {}
    for run in RUNS:
        print(f"run {run}: {args.steps} steps, batch order seed {data_seed[run]}")
        model = CharTransformer(*shape, attention[run]).cuda()
        model.load_state_dict(initial)
        train[run], val[run], tokens_per_s[run] = train_run(model, train_ids, val_ids, args,
                                                            data_seed[run])
    return train, val, tokens_per_s


def summarize(args, vocab, train, val, tokens_per_s, comparison):
    import torch
    return {
        "verdict": "PASS" if comparison["pass"] else "FAIL",
        "comparison": comparison,
        "runs": {run: {"final_train_loss": train[run][-1],
                       "final_train_loss_smoothed": centered_mean(train[run], args.smooth)[-1],
                       "final_val_loss": val[run][max(val[run])],
                       "tokens_per_second": tokens_per_s[run]} for run in RUNS},
        "val_max_abs_difference": max(abs(val[REFERENCE][s] - val[CANDIDATE][s])
                                      for s in val[REFERENCE]),
        "val_noise_band_max": max(abs(val[REFERENCE][s] - val[NOISE][s]) for s in val[REFERENCE]),
        "config": {**{k: v for k, v in vars(args).items() if k not in ("out", "plot_from")},
                   "lessons": str(args.lessons), "flashlab_path": str(args.flashlab_path),
                   "vocabulary_size": len(vocab), "head_dim": args.d_model // args.heads,
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__},
    }


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="output folder (default ./train-out; with "
                    "--plot-from, the CSV's folder)")
    ap.add_argument("--plot-from", type=Path, help="draw the plot from this losses.csv, no more")
    ap.add_argument("--flashlab-path", type=Path, default=REPO / "build" / "python",
                    help="the folder holding flashlab's Python module (<build>/python)")
    ap.add_argument("--lessons", type=Path, default=REPO / "lessons")
    ap.add_argument("--skip-if-unavailable", action="store_true",
                    help="exit 0 with a message when torch or a GPU is missing")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--context", type=int, default=256, help="N, characters per sequence")
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4, help="query heads H; d = d_model / H")
    ap.add_argument("--kv-heads", type=int, help="K/V heads H_kv (default H; fewer: GQA)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=30, help="steps of linear learning-rate warm-up")
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--smooth", type=int, default=20, help="smoothing window, in steps")
    ap.add_argument("--timing-warmup", type=int, default=10, help="steps left out of tokens/s")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0, help="the initial weights' seed")
    ap.add_argument("--data-seed", type=int, default=1, help="the batch order's seed")
    args = ap.parse_args(argv)
    if args.kv_heads is None:
        args.kv_heads = args.heads
    if args.out is None:  # the plot beside its CSV; a training run's files in ./train-out
        args.out = args.plot_from.parent if args.plot_from else Path("train-out")
    for name in ("steps", "batch", "context", "d_model", "layers", "heads", "kv_heads",
                 "warmup", "eval_every", "smooth"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)} must be at least 1")
    if args.d_model % args.heads or args.heads % args.kv_heads:
        ap.error(f"--d-model {args.d_model}, --heads {args.heads}, --kv-heads {args.kv_heads}: "
                 f"H must divide d_model (d = d_model / H) and H_kv must divide H")
    if not 0 <= args.timing_warmup < args.steps:
        ap.error(f"--timing-warmup {args.timing_warmup} must lie in [0, --steps {args.steps}): "
                 f"tokens per second are measured over the steps after it")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.plot_from:
            args.out.mkdir(parents=True, exist_ok=True)
            drawn = plot(args.plot_from, args.out / "loss_curves.png", args.smooth)
            return 0 if drawn else EXIT_MISSING
        text, files = load_corpus(args.lessons)
        vocab = Vocabulary(text)
        train_part, val_part = split_tail(vocab.encode(text), args.val_fraction, args.context)
    except (OSError, ValueError, KeyError) as e:  # a missing file, a bad CSV, a bad split
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"text: {len(files)} lesson files, {len(text)} characters, vocabulary {len(vocab)}, "
          f"{len(train_part)} for training, {len(val_part)} held out")
    missing = missing_requirement()
    if missing:
        print(f"{'SKIP' if args.skip_if_unavailable else 'cannot train'}: {missing}",
              file=sys.stdout if args.skip_if_unavailable else sys.stderr)
        return 0 if args.skip_if_unavailable else EXIT_MISSING

    train, val, tokens_per_s = train_all(args, vocab, train_part, val_part)
    comparison = compare(train, args.smooth, unigram_entropy(train_part))
    summary = summarize(args, vocab, train, val, tokens_per_s, comparison)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "losses.csv", train, val)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(args.out / "losses.csv", args.out / "loss_curves.png", args.smooth)
    for run in RUNS:
        print(f"{run:15s} final train {summary['runs'][run]['final_train_loss_smoothed']:.4f} "
              f"(smoothed), held-out {summary['runs'][run]['final_val_loss']:.4f}, "
              f"{tokens_per_s[run]:,.0f} tokens/s")
    c = comparison
    print(f"flashlab vs sdpa, smoothed over {args.smooth} steps: max gap "
          f"{c['max_abs_difference']:.4f} (noise band {c['noise_band_max']:.4f}), mean gap "
          f"{c['mean_abs_difference']:.4f} (noise {c['noise_band_mean']:.4f}); all finite: "
          f"{c['all_finite']}; learned: {c['learned']}")
    print(f"{summary['verdict']}: the flashlab curve {'agrees' if c['pass'] else 'does not agree'}"
          f" with sdpa's within run-to-run noise ({args.out / 'summary.json'})")
    return 0 if c["pass"] else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
