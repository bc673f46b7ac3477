"""A HuggingFace hub on loopback, for the hub tests: the routes
``huggingface_hub`` and ``embd pull`` call, served from folders.

- ``GET /api/models/<org>/<name>[/revision/<rev>]``: ``{id, sha, siblings,
  gated}``; ``.../tree/<rev>``: the file list with sizes, git blob ids and
  LFS hashes; an unknown repo is 401 ``X-Error-Code: RepoNotFound``, an unknown
  revision 404 ``RevisionNotFound`` (as the hub answers).
- ``HEAD``/``GET /<org>/<name>/resolve/<rev>/<file>``: a small file answers
  200 with ``ETag`` (its git blob id), ``X-Repo-Commit`` and its bytes; an LFS
  file (``*.safetensors``) answers 302 with ``X-Linked-Etag`` (its sha256),
  ``X-Linked-Size`` and a ``Location`` on another origin (``localhost``
  instead of ``127.0.0.1``), the LFS store, which serves ``Range`` requests.
  A missing file is 404 ``EntryNotFound``; a gated repo's files need
  ``Authorization: Bearer <token>`` (401 ``GatedRepo`` without, 403 with
  another).
- ``POST /_control`` sets faults: ``{"truncate_after": N}`` (LFS bodies stop
  after N bytes and the connection closes), ``{"slow": true}`` (LFS bodies in
  paced chunks); ``GET /_stats`` counts the body GETs per path and the
  ranged ones.

Run: ``python hub_server.py SPEC.json`` prints ``PORT`` on its first line.
SPEC maps ``org/name`` to ``{"dir": folder, "refs": {"main": "<commit>"},
"gated_token": optional, "drop": [files not served], "ghost": [files listed
but absent]}``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Repo:
    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        root = Path(spec["dir"])
        drop = set(spec.get("drop", []))
        self.files: dict[str, bytes] = {}
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and rel not in drop:
                self.files[rel] = p.read_bytes()
        self.ghosts: list[str] = list(spec.get("ghost", []))
        self.refs: dict[str, str] = dict(spec["refs"])
        self.gated_token: str | None = spec.get("gated_token")

    def commit(self, rev: str) -> str | None:
        if rev in self.refs.values():
            return rev
        return self.refs.get(rev)

    @staticmethod
    def is_lfs(name: str) -> bool:
        return name.endswith(".safetensors")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class State:
    def __init__(self, repos: dict[str, Repo]) -> None:
        self.repos = repos
        self.lfs: dict[str, bytes] = {}
        for r in repos.values():
            for name, data in r.files.items():
                if Repo.is_lfs(name):
                    self.lfs[hashlib.sha256(data).hexdigest()] = data
        self.truncate_after: int | None = None
        self.slow = False
        self.gets: dict[str, int] = {}
        self.ranged: dict[str, int] = {}
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.answer(
            status,
            body,
            {
                "Content-Type": "application/json",
                "X-Error-Code": code,
                "X-Error-Message": message,
            },
        )

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/_control":
            with self.state.lock:
                self.state.truncate_after = body.get("truncate_after")
                self.state.slow = bool(body.get("slow", False))
                if body.get("reset_stats"):
                    self.state.gets.clear()
                    self.state.ranged.clear()
            self.answer(200, b"{}")
        else:
            self.error(404, "NotFound", "no such route")

    def do_HEAD(self) -> None:  # noqa: N802
        self.route()

    def do_GET(self) -> None:  # noqa: N802
        self.route()

    def route(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        if path == "/_stats":
            with self.state.lock:
                body = json.dumps({"gets": self.state.gets, "ranged": self.state.ranged})
            self.answer(200, body.encode(), {"Content-Type": "application/json"})
            return
        if path.startswith("/api/models/"):
            self.model_info(path[len("/api/models/") :])
            return
        if path.startswith("/lfs/"):
            self.lfs(path[len("/lfs/") :])
            return
        parts = path.lstrip("/").split("/", 4)
        if len(parts) == 5 and parts[2] == "resolve":
            org, name, _, rev, file = parts
            self.resolve(f"{org}/{name}", urllib.parse.unquote(rev), urllib.parse.unquote(file))
            return
        self.error(404, "NotFound", f"no route {path}")

    def repo(self, name: str) -> Repo | None:
        return self.state.repos.get(name)

    def model_info(self, rest: str) -> None:
        segs = rest.split("/")
        repo_name = "/".join(segs[:2])
        rev = "main"
        if len(segs) >= 4 and segs[2] == "revision":
            rev = urllib.parse.unquote("/".join(segs[3:]))
        tree = len(segs) >= 4 and segs[2] == "tree"
        if tree:
            rev = urllib.parse.unquote(segs[3])
        repo = self.repo(repo_name)
        if repo is None:
            self.error(401, "RepoNotFound", "Repository Not Found")
            return
        commit = repo.commit(rev)
        if commit is None:
            self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return
        if tree:
            self.tree(repo)
            return
        siblings = [{"rfilename": f} for f in sorted([*repo.files, *repo.ghosts])]
        body = {
            "id": repo_name,
            "modelId": repo_name,
            "sha": commit,
            "private": False,
            "gated": "manual" if repo.gated_token else False,
            "disabled": False,
            "tags": [],
            "siblings": siblings,
        }
        self.answer(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def tree(self, repo: Repo) -> None:
        """``api/models/<repo>/tree/<rev>?recursive=true``: every file (what
        ``snapshot_download`` lists)."""
        entries: list[dict[str, Any]] = []
        for name, data in sorted(repo.files.items()):
            e: dict[str, Any] = {
                "type": "file",
                "path": name,
                "size": len(data),
                "oid": git_blob_id(data),
            }
            if Repo.is_lfs(name):
                e["lfs"] = {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                }
            entries.append(e)
        self.answer(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})

    def resolve(self, repo_name: str, rev: str, file: str) -> None:
        repo = self.repo(repo_name)
        if repo is None:
            self.error(401, "RepoNotFound", "Repository Not Found")
            return
        commit = repo.commit(rev)
        if commit is None:
            self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return
        if repo.gated_token:
            auth = self.headers.get("Authorization")
            if auth is None:
                self.error(401, "GatedRepo", f"Access to model {repo_name} is restricted.")
                return
            if auth != f"Bearer {repo.gated_token}":
                self.error(403, "GatedRepo", f"Access to model {repo_name} is restricted.")
                return
        data = repo.files.get(file)
        if data is None:
            self.error(404, "EntryNotFound", f"{file} does not exist on {rev}")
            return
        common = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if Repo.is_lfs(file):
            sha = hashlib.sha256(data).hexdigest()
            port = int(self.server.server_address[1])  # type: ignore[index]
            store = f"http://localhost:{port}/lfs/{sha}"
            self.send_response(302)
            for k, v in {
                **common,
                "Location": store,
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(data)),
                "ETag": f'"{git_blob_id(data)}"',
                "Content-Length": "0",
            }.items():
                self.send_header(k, v)
            self.end_headers()
            return
        if self.command == "GET":
            self.count(f"{repo_name}/{file}", False)
        self.answer(200, data, {**common, "ETag": f'"{git_blob_id(data)}"'})

    def count(self, key: str, ranged: bool) -> None:
        with self.state.lock:
            self.state.gets[key] = self.state.gets.get(key, 0) + 1
            if ranged:
                self.state.ranged[key] = self.state.ranged.get(key, 0) + 1

    def lfs(self, sha: str) -> None:
        data = self.state.lfs.get(sha)
        if data is None:
            self.error(404, "EntryNotFound", "no such object")
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[len("bytes=") :].split("-")[0])
        if self.command == "HEAD":
            self.answer(200, b"", {"Content-Length": str(len(data))})
            return
        self.count(f"lfs/{sha}", start > 0)
        if start >= len(data):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:]
        if start > 0:
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{sha}"')
        self.end_headers()
        with self.state.lock:
            cut = self.state.truncate_after
            slow = self.state.slow
        if cut is not None and cut < len(body):
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        step = 1 << 18
        for i in range(0, len(body), step):
            self.wfile.write(body[i : i + step])
            if slow:
                time.sleep(0.02)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    repos = {name: Repo(name, s) for name, s in spec.items()}
    Handler.state = State(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
