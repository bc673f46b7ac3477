"""Models by name against a hub on loopback (hub_server.py):

- ``huggingface_hub`` (PyPI, pinned) fills a cache from it; ``embd`` reads
  that cache offline (``embd encode -m``, ``embd serve -m``) and embeds as
  the reference (sentence-transformers' vectors under shared/reference);
- ``embd pull`` fills a fresh cache; ``huggingface_hub`` with
  ``HF_HUB_OFFLINE=1`` reads it (``snapshot_download``, ``hf_hub_download``,
  ``scan_cache_dir``) and ``embd serve -m`` serves from it with no hub;
- errors that name the cause: unknown repo, missing file, unknown revision,
  truncated download (then resumed), full disk, no network, gated model;
- two pulls of one repo at once: one download per file, no torn files.

Env: EMBD_BIN (the embd binary, embd-pull and embd-serve beside it),
EMBD_SHARED_DIR, EMBD_MINILM_DIR (the all-MiniLM-L6-v2 folder).
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "server" / "clients"))
from serve_process import serve  # noqa: E402

EMBD = Path(os.environ.get("EMBD_BIN", ROOT / "target" / "release" / "embd"))
SHARED = Path(os.environ.get("EMBD_SHARED_DIR", ROOT.parent / "shared"))
MINILM = Path(os.environ.get("EMBD_MINILM_DIR", ROOT / "models" / "all-MiniLM-L6-v2-hf"))
XLMR = SHARED / "reference" / "families" / "xlmr-tiny"
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
XLMR_ID = "tiny-org/xlmr-tiny"
C1 = "a" * 40
C2 = "b" * 40
TOKEN = "hf_loopback_test_token"


def reference(name: str, n: int) -> tuple[list[str], list[list[float]]]:
    lines = (SHARED / "reference" / name).read_text().splitlines()[:n]
    rows = [json.loads(x) for x in lines]
    return [r["text"] for r in rows], [r["embedding"] for r in rows]


def assert_close(got: list[list[float]], want: list[list[float]]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        dot = sum(a * b for a, b in zip(g, w, strict=True))
        cos = dot / (math.sqrt(sum(a * a for a in g)) * math.sqrt(sum(b * b for b in w)))
        worst = max(abs(a - b) for a, b in zip(g, w, strict=True))
        assert cos >= 0.99999 and worst <= 1e-5, f"row {i}: cosine {cos}, max {worst}"


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not (MINILM / "model.safetensors").is_file():
        pytest.fail(f"{MINILM} is absent: run scripts/fetch_model.sh")
    tmp = tmp_path_factory.mktemp("hub")
    spec = {
        MINILM_ID: {"dir": str(MINILM), "refs": {"main": C1}},
        XLMR_ID: {"dir": str(XLMR), "refs": {"main": C2, "v1.0": C2}},
        "tiny-org/gated": {"dir": str(XLMR), "refs": {"main": C2}, "gated_token": TOKEN},
        "tiny-org/no-weights": {
            "dir": str(XLMR),
            "refs": {"main": C2},
            "drop": ["model.safetensors"],
        },
        "tiny-org/ghost-file": {
            "dir": str(XLMR),
            "refs": {"main": C2},
            "ghost": ["vocab.txt"],
        },
    }
    (tmp / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "hub_server.py"), str(tmp / "spec.json")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def control(hub: str, **body: Any) -> None:
    req = urllib.request.Request(f"{hub}/_control", data=json.dumps(body).encode(), method="POST")
    urllib.request.urlopen(req).read()


def stats(hub: str) -> dict[str, dict[str, int]]:
    with urllib.request.urlopen(f"{hub}/_stats") as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def env_for(tmp: Path, hub: str | None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGINGFACE_", "EMBD_CACHE"))
    }
    env["HF_HUB_CACHE"] = str(tmp / "hf")
    env["HF_HOME"] = str(tmp / "hf-home")
    env["EMBD_CACHE_DIR"] = str(tmp / "embd")
    if hub is not None:
        env["HF_ENDPOINT"] = hub
    env.update(extra)
    return env


def embd(
    args: list[str], env: dict[str, str], stdin: str = "", **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EMBD), *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kw,
    )


def encode(model: str, texts: list[str], env: dict[str, str]) -> list[list[float]]:
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    r = embd(["encode", "-m", model, "--jsonl"], env, lines)
    assert r.returncode == 0, r.stderr
    return [json.loads(x)["embedding"] for x in r.stdout.splitlines()]


def hf_python(code: str, env: dict[str, str]) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_we_read_the_cache_huggingface_hub_filled(hub: str, tmp_path: Path) -> None:
    env = env_for(tmp_path, hub)
    hf_python(
        "import sys, huggingface_hub as h\n"
        f"for repo in ({MINILM_ID!r}, {XLMR_ID!r}):\n"
        "    h.snapshot_download(repo)\n",
        env,
    )
    offline = env_for(tmp_path, None, HF_HUB_OFFLINE="1")
    texts, want = reference("families/xlmr-tiny_reference.jsonl", 20)
    assert_close(encode(XLMR_ID, texts, offline), want)
    assert_close(encode(f"{XLMR_ID}@{C2}", texts[:3], offline), want[:3])
    texts, want = reference("minilm_reference.jsonl", 20)
    assert_close(encode(MINILM_ID, texts, offline), want)


def serve_embed(env: dict[str, str], model: str, texts: list[str]) -> list[list[float]]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with serve(EMBD, ["serve", "-m", model]) as url:
            req = urllib.request.Request(
                f"{url}/embed",
                data=json.dumps({"inputs": texts}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req) as r:
                got: list[list[float]] = json.loads(r.read())
            with urllib.request.urlopen(f"{url}/info") as r:
                assert json.loads(r.read())["model_id"] == model
            return got
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_huggingface_hub_reads_what_we_pulled_and_serve_runs_offline(
    hub: str, tmp_path: Path
) -> None:
    env = env_for(tmp_path, hub)
    r = embd(["pull", MINILM_ID], env)
    assert r.returncode == 0, r.stderr
    weights = Path(r.stdout.strip())
    assert weights.is_file() and weights.parent.parent == tmp_path / "embd"
    offline = env_for(tmp_path, None, HF_HUB_OFFLINE="1")
    out = hf_python(
        "import json, huggingface_hub as h\n"
        f"snap = h.snapshot_download({MINILM_ID!r})\n"
        f"cfg = h.hf_hub_download({MINILM_ID!r}, '1_Pooling/config.json')\n"
        "info = h.scan_cache_dir()\n"
        "repo = [r for r in info.repos if r.repo_id == "
        f"{MINILM_ID!r}][0]\n"
        "rev = list(repo.revisions)[0]\n"
        "print(json.dumps({'snap': snap, 'cfg': cfg, 'warnings': [str(w) for w in info.warnings],"
        " 'commit': rev.commit_hash, 'refs': sorted(rev.refs),"
        " 'files': sorted(f.file_name for f in rev.files)}))\n",
        offline,
    )
    got = json.loads(out)
    assert got["warnings"] == []
    assert got["commit"] == C1 and got["refs"] == ["main"]
    snap = Path(got["snap"])
    for name in ["config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json"]:
        assert (snap / name).read_bytes() == (MINILM / name).read_bytes(), name
    assert Path(got["cfg"]).read_bytes() == (MINILM / "1_Pooling/config.json").read_bytes()
    # The hub is not asked again: serve from the cache with no endpoint at all.
    texts, want = reference("minilm_reference.jsonl", 8)
    assert_close(serve_embed(offline, MINILM_ID, texts), want)


def test_pull_by_revision_writes_the_ref(hub: str, tmp_path: Path) -> None:
    env = env_for(tmp_path, hub)
    r = embd(["pull", XLMR_ID, "--revision", "v1.0", "--no-convert"], env)
    assert r.returncode == 0, r.stderr
    ref = tmp_path / "hf" / "models--tiny-org--xlmr-tiny" / "refs" / "v1.0"
    assert ref.read_text() == C2
    texts, want = reference("families/xlmr-tiny_reference.jsonl", 4)
    assert_close(encode(f"{XLMR_ID}@v1.0", texts, env_for(tmp_path, None)), want)


@pytest.mark.parametrize(
    ("model", "extra", "needle"),
    [
        ("tiny-org/absent", {}, "no model tiny-org/absent on the hub"),
        (f"{XLMR_ID}@nope", {}, "has no revision 'nope'"),
        ("tiny-org/no-weights", {}, "has no model.safetensors"),
        ("tiny-org/ghost-file", {}, "has no file vocab.txt"),
        ("tiny-org/gated", {}, "is gated or private (HTTP 401)"),
        ("tiny-org/gated", {"HF_TOKEN": "hf_wrong"}, "token in HF_TOKEN has no access"),
    ],
)
def test_errors_name_the_cause(
    hub: str, tmp_path: Path, model: str, extra: dict[str, str], needle: str
) -> None:
    r = embd(["pull", model, "--no-convert"], env_for(tmp_path, hub, **extra))
    assert r.returncode == 1
    assert needle in r.stderr, r.stderr


def test_a_gated_model_pulls_with_its_token(hub: str, tmp_path: Path) -> None:
    r = embd(["pull", "tiny-org/gated"], env_for(tmp_path, hub, HF_TOKEN=TOKEN))
    assert r.returncode == 0, r.stderr


def test_no_network_names_the_endpoint(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port once the socket is closed.
    r = embd(["pull", XLMR_ID], env_for(tmp_path, f"http://127.0.0.1:{port}"))
    assert r.returncode == 1
    assert "connection refused" in r.stderr and f"127.0.0.1:{port}" in r.stderr, r.stderr


def test_a_truncated_download_is_named_then_resumed(hub: str, tmp_path: Path) -> None:
    env = env_for(tmp_path, hub)
    control(hub, truncate_after=1_000_000, reset_stats=True)
    try:
        r = embd(["pull", XLMR_ID, "--no-convert"], env)
    finally:
        control(hub)
    assert r.returncode == 1
    size = (XLMR / "model.safetensors").stat().st_size
    assert f"stopped at 1000000 of {size} bytes" in r.stderr, r.stderr
    assert "truncated" in r.stderr
    blobs = tmp_path / "hf" / "models--tiny-org--xlmr-tiny" / "blobs"
    assert [p.stat().st_size for p in blobs.glob("*.incomplete")] == [1_000_000]
    r = embd(["pull", XLMR_ID], env)
    assert r.returncode == 0, r.stderr
    assert "resuming at byte 1000000" in r.stderr
    assert sum(stats(hub)["ranged"].values()) == 1
    assert not list(blobs.glob("*.incomplete"))
    texts, want = reference("families/xlmr-tiny_reference.jsonl", 4)
    assert_close(encode(XLMR_ID, texts, env), want)


def _file_size_limit() -> None:
    # 2 MiB per file; SIGXFSZ ignored so that a write past it fails with
    # EFBIG (what a full disk's ENOSPC looks like to the writer).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))


def test_a_full_disk_is_named(hub: str, tmp_path: Path) -> None:
    r = embd(
        ["pull", XLMR_ID, "--no-convert"],
        env_for(tmp_path, hub),
        preexec_fn=_file_size_limit,
    )
    assert r.returncode == 1
    assert "no space to write model.safetensors" in r.stderr, r.stderr


def test_two_pulls_at_once_download_each_file_once(hub: str, tmp_path: Path) -> None:
    env = env_for(tmp_path, hub)
    control(hub, slow=True, reset_stats=True)
    try:
        procs = [
            subprocess.Popen(
                [str(EMBD), "pull", XLMR_ID],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        control(hub)
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1
    gets = stats(hub)["gets"]
    assert gets and all(n == 1 for n in gets.values()), gets
    snap = tmp_path / "hf" / "models--tiny-org--xlmr-tiny" / "snapshots" / C2
    for f in XLMR.rglob("*"):
        if f.is_file():
            rel = f.relative_to(XLMR)
            assert (snap / rel).read_bytes() == f.read_bytes(), rel
    r = embd(["verify", XLMR_ID], env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pull_refuses_offline_mode(tmp_path: Path) -> None:
    r = embd(["pull", XLMR_ID], env_for(tmp_path, None, HF_HUB_OFFLINE="1"))
    assert r.returncode == 1 and "HF_HUB_OFFLINE" in r.stderr
