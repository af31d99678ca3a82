"""A stand-in for the Hugging Face Hub on this machine, for tests of loading through a mirror
(``HF_ENDPOINT``) and through a proxy (``HTTP_PROXY``): it serves model folders as repositories at one
commit, answering the file requests huggingface_hub makes (``HEAD`` / ``GET .../resolve/REV/FILE``, with
the commit and ETag headers it checks) and the API's model and tree listings. As a proxy it receives
absolute URLs (``GET http://HOST/...``) and answers them the same way; every request is recorded."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlparse

#: The one commit every served repository is at.
COMMIT = hashlib.sha1(b"full-metric test hub").hexdigest()
RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
API = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+)|/tree/([^/]+)(?:/(.*))?)?$")


class _Handler(BaseHTTPRequestHandler):
    server: "Hub"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), "X-Repo-Commit": COMMIT, **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def _answer(self) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        self.server.requests.append((self.command, url.netloc or self.headers.get("Host", ""), path))
        if self.server.failing is not None:  # the Hub down: every request answered with this status
            return self._send(self.server.failing, b"Service Unavailable")
        if (found := RESOLVE.match(path)) is not None:
            repo, revision, name = found.groups()
            folder = self.server.repos.get(repo)
            if folder is None or revision not in ("main", COMMIT):
                return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound" if folder is None else "RevisionNotFound"})
            file = folder / name
            if not file.is_file():
                return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})
            body = file.read_bytes()
            return self._send(200, body, {"ETag": f'"{hashlib.sha1(body).hexdigest()}"'})
        if (found := API.match(path)) is not None:
            repo, _, tree, under = found.groups()
            folder = self.server.repos.get(repo)
            if folder is None:
                return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
            files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
            if tree is None:
                listing: object = {"id": repo, "modelId": repo, "sha": COMMIT, "private": False,
                                   "siblings": [{"rfilename": f} for f in files]}
            else:
                prefix = f"{under.strip('/')}/" if under else ""
                if prefix and not any(f.startswith(prefix) for f in files):
                    return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"})
                listing = [{"type": "file", "path": f, "size": (folder / f).stat().st_size, "oid": COMMIT}
                           for f in files if f.startswith(prefix) and "/" not in f[len(prefix):]]
            return self._send(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
        self._send(404, b"{}")

    do_GET = do_HEAD = _answer


class Hub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, repos: dict[str, Path]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = repos
        self.requests: list[tuple[str, str, str]] = []
        #: a status (503...) every request is answered with, while set
        self.failing: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def serving(repos: dict[str, Path]) -> Iterator[Hub]:
    """The stand-in Hub serving ``repos`` (repository id -> folder) on a free port of 127.0.0.1."""
    hub = Hub(repos)
    thread = threading.Thread(target=hub.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        hub.shutdown()
        hub.server_close()
