"""Notebooks are first-class: notebooks/quickstart.ipynb runs in a Jupyter kernel (nbclient,
quick mode) and shows what it says: the user's own pyplot figures before and after
attnkit's, attnkit's figures inline, training progress, the explorer inline. And attnkit's
plots leave matplotlib's global state (backend, rcParams, pyplot) as they found it."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
WIDGET = "application/vnd.jupyter.widget-view+json"
PROGRESS = re.compile(r"train:.*\b\d+/\d+")  # tqdm's "train: 40%|...| 46/114" or a line's


def _raw(rc) -> dict:
    """rcParams as stored: reading ``rcParams["backend"]`` would resolve (choose) it."""
    return dict(dict.items(rc))


def test_attnkit_plots_leave_the_global_plotting_state_alone(tmp_path):
    import matplotlib
    from matplotlib._pylab_helpers import Gcf  # pyplot's list of figures (plt.show shows)

    import attnkit

    pyplot_before = "matplotlib.pyplot" in sys.modules
    managed = len(Gcf.get_all_fig_managers())
    with matplotlib.rc_context({"font.family": ["serif"], "axes.unicode_minus": True}):
        before = _raw(matplotlib.rcParams)
        figs = [
            attnkit.plot_positional_encoding(8, 16),
            attnkit.plot_attention(np.eye(3), ["가", "나", "다"], ["a", "b", "c"], title="제목"),
        ]
        assert all(f._repr_png_()[:4] == b"\x89PNG" for f in figs)
        png = attnkit.plot_positional_encoding(8, 16, path=tmp_path / "pe.png")
        assert png == tmp_path / "pe.png" and png.read_bytes()[:4] == b"\x89PNG"
        after = _raw(matplotlib.rcParams)
        assert sorted(k for k in before if before[k] != after[k]) == []  # backend included
    # no pyplot: attnkit's figures are not in its list (a notebook's plt.show() shows only
    # the user's), and no backend was chosen for the user
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_before
    assert len(Gcf.get_all_fig_managers()) == managed


def test_figures_use_a_hangul_font_only_while_drawn(tmp_path):
    import matplotlib
    import matplotlib.font_manager as fm

    from attnkit.runtime import viz

    fig = viz.plot_attention(np.eye(2), ["가", "나"], ["a", "b"], title="제목")
    family = viz._font_family()
    if not family:
        pytest.skip("no Hangul font installed")
    title = fig.axes[0].title
    assert fm.FontProperties(family=list(family)).get_family() == title.get_fontfamily()
    assert matplotlib.rcParams["font.family"] != list(family)
    # pickled by name (it is shown later, or sent to another process)
    import pickle

    again = pickle.loads(pickle.dumps(fig))
    assert type(again) is type(fig) and again._repr_png_()[:4] == b"\x89PNG"
    assert viz.save_figure(fig, tmp_path / "a.svg").read_text().startswith("<?xml")


def test_a_plot_without_matplotlib_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    from attnkit.core.extras import MissingExtraError
    from attnkit.runtime import viz

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if never installed
    for draw in (lambda: viz.plot_positional_encoding(4, 4), lambda: viz.new_figure((1, 1))):
        with pytest.raises(MissingExtraError) as caught:
            draw()
        message = str(caught.value)
        assert 'plotting needs the plot extra: pip install "attnkit[plot]"' in message
        assert "\n" not in message


def test_plot_curves_of_a_run_or_rows(tmp_path):
    from attnkit.core.errors import InputError
    from attnkit.runtime import viz

    rows = [{"step": 1, "train_loss": 1.0}, {"step": 2, "train_loss": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for source in (rows, tmp_path, tmp_path / "metrics.jsonl", str(tmp_path)):
        assert viz.curve_rows(source) == rows
    with pytest.raises(InputError, match="no metrics file"):
        viz.curve_rows(tmp_path / "nothing")
    with pytest.raises(InputError, match="needs a run"):
        viz.curve_rows([1, 2])
    left = viz.plot_curves(tmp_path).axes[0]
    assert [line.get_label() for line in left.get_lines()] == ["train_loss"]


def _kernel(tmp_path: Path, monkeypatch) -> str:
    """A kernelspec for this interpreter (.venv's python), alone on JUPYTER_PATH: whatever
    other "python3" kernels the machine has, the notebook runs with the code under test."""
    name = "attnkit-test"
    spec = tmp_path / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": name, "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return name


def _outputs(nb, tag: str) -> list:
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"one cell tagged {tag}"
    return cells[0].outputs


def _images(outputs: list) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


@pytest.mark.slow
def test_quickstart_notebook_runs_and_shows_everything(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("ATTNKIT_NOTEBOOK_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's own inline backend
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile
    nb = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=_kernel(tmp_path, monkeypatch),
        timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},  # runs/ is written there
    )
    client.execute()

    # the user's own pyplot figures, before and after attnkit drew (inline backend intact)
    assert _images(_outputs(nb, "user-plot-before")) == 1
    assert _images(_outputs(nb, "user-plot-after")) == 1
    # attnkit's figures: returned objects, displayed inline as PNG
    for tag in ("attnkit-plot", "attnkit-curves", "attention"):
        assert _images(_outputs(nb, tag)) == 1, tag
    # training showed progress: a live widget bar, or progress lines on stderr
    train = _outputs(nb, "train")
    widget = any(WIDGET in o.get("data", {}) for o in train)
    err = "".join(o.get("text", "") for o in train if o.get("name") == "stderr")
    assert widget or PROGRESS.search(err), train
    # the explorer inline: a sandboxed iframe holding the whole page (no CDN, no request)
    (frame,) = [o["data"]["text/html"] for o in _outputs(nb, "explain") if "data" in o]
    assert frame.startswith('<iframe sandbox="allow-scripts" ')
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "connect-src 'none'" in html.unescape(page)  # the page may make no request
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing fetched
    assert (tmp_path / "runs" / "quickstart" / "curves.png").is_file()
    assert (
        (tmp_path / "runs" / "explain.html")
        .read_text(encoding="utf-8")
        .startswith("<!doctype html>")
    )


LEGACY = Path(__file__).parents[1] / "fixtures" / "legacy_runs"


def test_explain_is_the_cli_page_inline_and_saves_through_the_guard(tmp_path):
    from types import SimpleNamespace

    import attnkit
    from attnkit.app.explain.page import explain_traces, render_page
    from attnkit.core.errors import InputError

    run = LEGACY / "classify-transformer"
    text = '</iframe> "최악" &'  # nothing in the text can end the frame's attribute
    ex = attnkit.explain(SimpleNamespace(run_dir=run), text)  # what attnkit.train returns
    assert ex.trace["family"] == "classifier" and ex.trace["text"] == text
    # the very page `attnkit explain RUN TEXT --html FILE` writes
    assert ex.html == render_page(explain_traces(attnkit.load(run, precision="fp32"), text))
    frame = ex._repr_html_()
    found = re.fullmatch(
        r'<iframe sandbox="allow-scripts" title="[^"<>]*" style="[^"<>]*" '
        r'srcdoc="([^"<>]*)"></iframe>',
        frame,
    )
    assert found and html.unescape(found.group(1)) == ex.html
    assert ex.save(tmp_path / "e.html").read_text(encoding="utf-8") == ex.html
    with pytest.raises(InputError, match="is a folder"):
        ex.save(tmp_path)  # the output guard of every writer
    with pytest.raises(InputError, match="non-empty text"):
        attnkit.explain(run, "  ")
    with pytest.raises(InputError, match="needs a run directory"):
        attnkit.explain(42, "x")


def test_a_predictors_heatmap_is_a_figure_without_a_path(tmp_path):
    import attnkit

    clf = attnkit.load(LEGACY / "classify-transformer")
    fig = clf.explain("최악 영화", layer=0)
    assert fig._repr_png_()[:4] == b"\x89PNG" and "layer 0" in fig.axes[0].get_title()
    assert clf.explain("최악 영화", tmp_path / "h.png") == tmp_path / "h.png"


@pytest.mark.slow
def test_the_inline_explorer_runs_in_its_sandboxed_frame(tmp_path):
    """In a browser (as Jupyter shows a cell's HTML output): the explorer draws inside the
    frame, makes no request, and its script cannot reach the notebook's page."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from browser_support import find_chromium

    chromium, why_not = find_chromium()
    if chromium is None:
        pytest.skip(why_not)
    import attnkit

    run = LEGACY / "classify-transformer"
    text = "최악 영화 정말"
    want = attnkit.load(run).predict([text])[0]
    host = tmp_path / "notebook.html"
    cell = attnkit.explain(run, text)._repr_html_()
    host.write_text(f"<!doctype html><title>notebook</title><body>{cell}</body>", "utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.set_default_timeout(30_000)
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(host.as_uri())
            frame = page.frame_locator("iframe")
            frame.locator("body[data-ready=true]").wait_for()
            shown = f"predicted: {want.label} ({100 * want.probability:.1f}%)"
            assert frame.locator("#cls-pred").inner_text() == shown
            (inner,) = [f for f in page.frames if f != page.main_frame]
            reach = (
                "() => { try { return window.parent.document.title } catch (e) { return 'no' } }"
            )
            assert inner.evaluate(reach) == "no"  # an opaque origin: the notebook is out of reach
            assert requests == [host.as_uri()], requests
        finally:
            browser.close()


# ------------------------------------------------------------------ the course labs
# notebooks/labNNN_*.ipynb, one per lecture of ../shared/course/ (000-004). Each runs top to
# bottom in a quick mode (ATTNKIT_LAB_QUICK=1: tiny sizes, a few steps), writes its runs
# under runs/labNNN/ of the working folder, and ends with a LAB_SUMMARY line of its numbers.
LABS = sorted(NOTEBOOKS.glob("lab*.ipynb"))
LAB_DATA = {  # the datasets each lab reads (from ATTNKIT_DATA)
    "lab000": ["nsmc"],
    "lab001": ["nsmc"],
    "lab002": ["nsmc"],
    "lab003": ["nsmc", "klue", "korquad"],
    "lab004": ["imdb"],
}


def _in_range(value, low, high) -> bool:
    return isinstance(value, (int, float)) and low <= value <= high


def _check_lab000(s: dict) -> None:
    assert s["mha_max_abs_diff"] < 1e-5 and s["block_max_abs_diff"] < 1e-4
    assert _in_range(s["val_accuracy"], 0, 1) and _in_range(s["positive_probability"], 0, 1)


def _check_lab001(s: dict) -> None:
    # BERT-base 110M and BERT-large 335M, counted on the meta device (attnkit's BERT)
    assert s["bert_base_parameters"] == 109_482_240
    assert s["bert_large_parameters"] == 335_141_888
    assert s["pe_max_abs_diff"] < 1e-5 and s["layernorm_max_abs_diff"] < 1e-5
    assert _in_range(s["fine-tuning_val_accuracy"], 0, 1)
    assert _in_range(s["feature-based_val_accuracy"], 0, 1)


def _check_lab002(s: dict) -> None:
    for name in ("dot", "scaled_dot", "general", "concat", "location"):  # five distributions
        assert abs(s[f"alpha_sum_{name}"] - 1) < 1e-5, name
    assert s["look_ahead_hidden"] == 6  # the 6 future keys of 4 tokens get weight 0
    assert _in_range(s["lstm_val_bleu"], 0, 100) and _in_range(s["transformer_val_bleu"], 0, 100)
    for cell in ("rnn", "lstm", "gru"):
        assert _in_range(s[f"nsmc_{cell}_val_accuracy"], 0, 1), cell


def _check_lab003(s: dict) -> None:
    assert 0.12 < s["mlm_chosen_share"] < 0.18  # 15% of the real tokens ...
    assert 0.75 < s["mlm_mask_share"] < 0.85  # ... 80% of them [MASK]
    assert abs(s["elmo_layer_weights_sum"] - 1) < 1e-5 and _in_range(s["nsp_probability"], 0, 1)
    assert s["gpt_val_perplexity"] > 1
    metrics = {"nsmc-bert": "val_accuracy", "klue-ner-bert": "val_f1",
               "korquad-bert": "val_exact_match", "klue-nli-bert": "val_accuracy"}  # fmt: skip
    for recipe, key in metrics.items():
        assert _in_range(s[recipe][key], 0, 100), recipe


def _check_lab004(s: dict) -> None:
    assert s["hard_vs_soft_beta50_max_diff"] < 1e-6 and s["kv_max_abs_diff"] < 1e-4
    assert _in_range(s["val_accuracy"], 0, 1) and _in_range(s["probability"], 0.5, 1)


LAB_CHECKS = {
    "lab000": _check_lab000,
    "lab001": _check_lab001,
    "lab002": _check_lab002,
    "lab003": _check_lab003,
    "lab004": _check_lab004,
}


def _stdout(outputs: list) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")


def test_five_labs_one_per_lecture():
    assert [p.name.split("_")[0] for p in LABS] == sorted(LAB_CHECKS)
    course = Path(__file__).resolve().parents[3] / "shared" / "course"
    for path in LABS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        lecture = path.name[3:6]
        cited = re.search(rf"`({lecture}_[0-9a-f]+\.txt)`", text)
        assert cited, f"{path.name} cites its lecture file"
        if course.is_dir():
            assert (course / cited.group(1)).is_file(), cited.group(1)
        # every markdown cell: Korean first, with English alongside (in italics)
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            source = "".join(cell["source"])
            hangul = re.search(r"[가-힣]", source)
            english = re.search(r"(^|\n)\*[^*\s]|· \*[^*\s]", source)  # *English ...*
            assert hangul and english, f"{path.name}: {source[:60]!r}"
            assert hangul.start() < english.start(), f"{path.name}: Korean first {source[:60]!r}"
        setup = nb["cells"][1]
        assert 'os.environ.get("ATTNKIT_LAB_QUICK")' in "".join(setup["source"])


def test_committed_notebooks_have_no_outputs_and_stay_so(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    sys.path.insert(0, str(NOTEBOOKS.parent / "tools"))
    try:
        import strip_notebooks
    finally:
        sys.path.pop(0)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert len(paths) >= 6  # quickstart + the five labs
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name
                assert "execution" not in cell.metadata, path.name
    assert strip_notebooks.main(["--check", *map(str, paths)]) == 0
    # the tool finds and strips a notebook that was run (and keeps the tags)
    ran = json.loads(paths[0].read_text(encoding="utf-8"))
    code = next(c for c in ran["cells"] if c["cell_type"] == "code")
    code["execution_count"] = 3
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    code["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    dirty = tmp_path / "ran.ipynb"
    dirty.write_text(json.dumps(ran), encoding="utf-8")
    assert strip_notebooks.main(["--check", str(dirty)]) == 1
    assert strip_notebooks.main([str(dirty)]) == 0
    assert strip_notebooks.main(["--check", str(dirty)]) == 0
    assert dirty.read_text(encoding="utf-8") == paths[0].read_text(encoding="utf-8")


def test_a_labs_runs_never_overwrite_an_earlier_run(tmp_path, monkeypatch):
    """The setup cell's ``fresh(name)``: a new folder each time (name, name-2, ...)."""
    nb = json.loads(LABS[0].read_text(encoding="utf-8"))
    setup = "".join(nb["cells"][1]["source"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNKIT_LAB_QUICK", "1")
    scope: dict = {}
    exec(compile(setup, "setup", "exec"), scope)  # noqa: S102 (our own notebook's cell)
    assert scope["QUICK"] is True and "training.num_threads=1" in scope["FAST"]
    first = scope["fresh"]("run")
    assert first == Path("runs/lab000/run")
    first.mkdir(parents=True)
    second = scope["fresh"]("run")
    assert second == Path("runs/lab000/run-2")
    second.mkdir()
    assert scope["fresh"]("run") == Path("runs/lab000/run-3")


@pytest.mark.slow
@pytest.mark.parametrize("path", LABS, ids=[p.name.split("_")[0] for p in LABS])
def test_lab_runs_top_to_bottom_in_quick_mode(path, tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    from attnkit.data.paths import resolve_data_dir

    lab = path.name.split("_")[0]
    missing = [d for d in LAB_DATA[lab] if not (resolve_data_dir() / d).is_dir()]
    if missing:
        pytest.skip(f"{lab} reads {', '.join(missing)}: not in the data folder (ATTNKIT_DATA)")
    monkeypatch.setenv("ATTNKIT_LAB_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("ATTNKIT_DATA", str(resolve_data_dir().resolve()))
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=_kernel(tmp_path, monkeypatch),
        timeout=600,
        resources={"metadata": {"path": str(work)}},  # runs/labNNN/ is written there
    )
    client.execute()  # a failing cell (a parity assert included) fails the test

    tags = [t for c in nb.cells for t in c.get("metadata", {}).get("tags", [])]
    parity = [t for t in tags if t.startswith("parity")]
    assert parity, "each lab checks attnkit against the lecture's formulas"
    for tag in parity:
        assert "PARITY OK" in _stdout(_outputs(nb, tag)), tag
    # the explorer inline: the whole page in a sandboxed frame
    (frame,) = [o["data"]["text/html"] for o in _outputs(nb, "explain") if "data" in o]
    assert frame.startswith('<iframe sandbox="allow-scripts" ')
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    # the numbers the lab ends with
    (line,) = [x for x in _stdout(_outputs(nb, "summary")).splitlines() if x.startswith("LAB_")]
    summary = json.loads(line.split(" ", 1)[1])
    LAB_CHECKS[lab](summary)
    # its runs: finished run folders under runs/labNNN/ of the working folder
    runs = [p for p in (work / "runs" / lab).iterdir() if (p / "config.json").is_file()]
    assert runs and all((p / "model.safetensors").is_file() for p in runs), runs
    if "run" in summary:
        assert (work / summary["run"] / "config.json").is_file()
    assert not (NOTEBOOKS / "runs").exists()  # nothing written beside the notebooks
