"""The checks of scripts/wheel-check.sh, one subcommand each (run by the dev venv's python for the first
two, by the fresh venv's for the last two):

  archives DIST          the wheel and the sdist hold the package and its data (the tracking configurations:
                         mlruns_config/ at the sdist's top, cctk/store/mlruns_config/ in the wheel), no tests,
                         outputs or store
  tiny FOLDER            a tiny random Llama with the bundled tokenizer saved to FOLDER (as tests' tiny_dir)
  run-id OUTPUTS         the MLflow run id of the one session folder under OUTPUTS
  finished RUN VENV OUT  RUN is FINISHED in ./mlruns/ of this folder, cctk and its tracking configurations came
                         from VENV, OUT holds the report
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The tracking configurations: the repository's top-level mlruns_config/, the one source; the sdist keeps
# them there, the wheel holds them inside the package
CONFIGS = sorted(p.name for p in (ROOT / "mlruns_config").glob("*.toml"))
IN_WHEEL = [f"cctk/store/mlruns_config/{name}" for name in CONFIGS]
IN_SDIST = [f"mlruns_config/{name}" for name in CONFIGS]
NEVER = {"mlruns", "__pycache__"}  # nor a store or byte code anywhere below


def check(ok: bool, message: str) -> None:
    if not ok:
        sys.exit(f"wheel-check: {message}")


def archive_problems(names: list[str], required: list[str], top: set[str]) -> list[str]:
    """What is wrong with an archive's file list: a required file missing, a folder at the top other than
    ``top`` (the package and its metadata: no tests/, outputs/, mlruns/, .venv/), a NEVER folder anywhere."""
    missing = [f"missing {name}" for name in required if name not in names]
    folders = [Path(name).parts[:-1] for name in names]
    banned = [
        f"carries {name}"
        for name, parts in zip(names, folders, strict=True)
        if parts and (parts[0] not in top or NEVER & set(parts))
    ]
    return missing + banned


def archives(dist: str) -> None:
    dist = Path(dist)
    (wheel,), (sdist,) = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    version = wheel.name.split("-")[1]
    wheel_names = zipfile.ZipFile(wheel).namelist()
    check(len(CONFIGS) >= 3, f"mlruns_config/ of the checkout holds {CONFIGS}: embedded, server, postgres at least")
    problems = archive_problems(
        wheel_names, [*IN_WHEEL, "cctk/py.typed", "cctk/__main__.py"], {"cctk", f"cctk-{version}.dist-info"}
    )
    with tarfile.open(sdist) as tar:  # members under cctk-X.Y.Z/
        sdist_names = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()]
    problems += archive_problems(
        sdist_names,
        [*IN_SDIST, "cctk/py.typed", "pyproject.toml", "setup.py", "README.md", "LICENSE"],
        {"cctk", "cctk.egg-info", "mlruns_config"},
    )
    check(not problems, "; ".join(problems))
    print(f"{wheel.name}: {len(wheel_names)} files, among them cctk/py.typed and")
    for name in IN_WHEEL:
        print(f"  {name}")
    print(
        f"{sdist.name}: {len(sdist_names)} files, {', '.join(IN_SDIST)} at its top; "
        "neither carries tests/, outputs/ or mlruns/"
    )


def tiny(folder: str) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from builders import tiny_model
    from transformers import AutoTokenizer

    from cctk.core.lm.models import bundled_gguf

    gguf_folder, name = bundled_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    tiny_model("llama", len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    print(f"tiny model in {folder}")


def run_id(outputs: str) -> None:
    outputs = Path(outputs)
    from cctk.store.session import read_run_info

    sessions = [p for p in outputs.iterdir() if p.is_dir()]
    check(len(sessions) == 1, f"expected one session folder in {outputs}, found {sessions}")
    print(read_run_info(sessions[0]).mlflow.run_id)


def finished(run: str, venv: str, report: str) -> None:
    """Read back with MLflow's own client from ./mlruns/mlflow.db, and with the wheel's cctk.results."""
    venv, report = Path(venv).resolve(), Path(report)
    from mlflow import MlflowClient

    import cctk
    import cctk.results

    here = Path.cwd()
    check(Path(cctk.__file__).is_relative_to(venv), f"cctk was imported from {cctk.__file__}, not from {venv}")
    client = MlflowClient(f"sqlite:///{here}/mlruns/mlflow.db")
    parent = client.get_run(run)
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run}'")
    statuses = sorted(c.info.status for c in children)
    check(parent.info.status == "FINISHED", f"run {run} is {parent.info.status}")
    check(statuses == ["FINISHED"] * 3, f"Part A's three models should be FINISHED nested runs: {statuses}")
    check(parent.info.artifact_uri.startswith((here / "mlruns" / "artifacts").as_uri()), parent.info.artifact_uri)
    states = {r.data.tags.get("cctk.git.state") for r in [parent, *children]}  # a wheel: no repository, said so
    check(states == {"none"}, f"a wheel's runs should say cctk.git.state=none: {states}")
    check("mlflow.source.git.commit" not in parent.data.tags, "a wheel's run names a commit it cannot know")
    from cctk.store import tracking

    folders = [str(f) for f in tracking.config_folders()]  # this folder has no mlruns_config/ of its own
    shipped = Path(cctk.__file__).parent / "store" / "mlruns_config"
    check(folders == [str(shipped)], f"the configurations were read from {folders}, not from the wheel's {shipped}")
    check(tracking.config_names() == ["embedded", "postgres", "server"], f"names: {tracking.config_names()}")
    tables = cctk.results.load(run).tables
    check("table01" in tables and len(tables["table01"]) == 6, f"table01 of run {run}: {tables.get('table01')}")
    rendered = sorted(p.relative_to(report).as_posix() for p in report.rglob("*.png"))
    check(len(rendered) > 0, f"cctk report wrote no figure under {report}")
    print(f"cctk {cctk.__version__} from {Path(cctk.__file__).parent}")
    print(f"tracking configurations {', '.join(tracking.config_names())} from {shipped}")
    print(
        f"run {run}: {parent.info.status} in {here}/mlruns/mlflow.db, nested {', '.join(statuses)}; "
        f"artifacts in {parent.info.artifact_uri}; cctk.git.state none (a wheel)"
    )
    print(
        f"cctk.results.load: {len(tables)} tables, table01 {len(tables['table01'])} rows; "
        f"cctk report: {len(rendered)} PNG figures under {report}"
    )


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"archives": archives, "tiny": tiny, "run-id": run_id, "finished": finished}[command](*args)
