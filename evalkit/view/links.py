"""Where each page lives: server URLs (the scheme in the viewer's docs) or the static export's relative files.

Pages are rendered once for both; only this object differs. Names the viewer
did not choose (run ids, datasets, sample ids) are percent-encoded as one path
segment each on the server; a sample id that is ``.`` or ``..`` goes in the
query instead (``.../sample/<dataset>/<metric>/?id=..``), since browsers treat
even ``%2E%2E`` as a step up. The export names its files by a safe slug or a
hash instead.
"""

from __future__ import annotations

import hashlib
import zlib
from urllib.parse import quote, urlencode

from evalkit.util.safe_names import safe_name


def segment(text: str) -> str:
    """One percent-encoded path segment (``/`` included)."""
    return quote(text, safe="")


def dots(text: str) -> bool:
    """True for ``.`` and ``..`` (and an empty name): segments a browser drops or climbs even as ``%2E%2E``."""
    return text in ("", ".", "..")


def _query(params: dict[str, str] | None) -> str:
    return ("?" + urlencode(params)) if params else ""


class Links:
    """URLs on the live server (absolute paths, query strings)."""

    export = False

    def runs(self) -> str:
        return "/"

    def run(self, run_id: str) -> str:
        return f"/run/{segment(run_id)}/"

    def pair(self, run_id: str, dataset: str, metric: str, params: dict[str, str] | None = None) -> str:
        return f"/run/{segment(run_id)}/pair/{segment(dataset)}/{segment(metric)}/{_query(params)}"

    def sample(self, run_id: str, dataset: str, metric: str, sample_id: str) -> str:
        base = f"/run/{segment(run_id)}/sample/{segment(dataset)}/{segment(metric)}/"
        return base + _query({"id": sample_id}) if dots(sample_id) else base + segment(sample_id)

    def media(self, run_id: str, dataset: str, key: str, part: str, ext: str = "") -> str:
        """The URL of one media part; ``ext`` (wav, png, ...) names the export's file and is unused here."""
        return f"/run/{segment(run_id)}/media/{segment(dataset)}/{segment(key)}/{segment(part)}"

    def compare(self, params: dict[str, str] | None = None) -> str | None:
        return f"/compare/{_query(params)}"

    def static(self, name: str) -> str:
        return f"/static/{name}"


#: the export's page of one pair's samples, drawn by sample.js from the chunk file the address names
SAMPLE_PAGE = "sample.html"


def sample_chunk(sample_id: str, chunks: int) -> int:
    """The export's chunk file holding a sample's records (``samples/<n>.js``): a hash of its id, so a link to
    a sample needs no table of where each one went."""
    return zlib.crc32(sample_id.encode("utf-8", "surrogatepass")) % max(1, chunks)


def compare_file(model_a: str, model_b: str) -> str:
    """The export's file name of one run's model-vs-model comparison on a pair (a hash: any model name is safe)."""
    digest = hashlib.sha256(f"{model_a}\0{model_b}".encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"c-{digest}.html"


class ExportLinks(Links):
    """Relative file paths of the static export, as seen from a page ``depth`` folders below its root."""

    export = True

    def __init__(self, depth: int, chunks: dict[tuple[str, str, str], int] | None = None) -> None:
        self.up = "../" * depth
        #: each pair's number of chunk files (a sample's link names its chunk)
        self.chunks = chunks if chunks is not None else {}

    def runs(self) -> str:
        return f"{self.up}index.html"

    def run_dir(self, run_id: str) -> str:
        return f"r/{safe_name(run_id)}"

    def pair_dir(self, run_id: str, dataset: str, metric: str) -> str:
        return f"{self.run_dir(run_id)}/{safe_name(dataset, metric)}"

    def run(self, run_id: str) -> str:
        return f"{self.up}{self.run_dir(run_id)}/index.html"

    def pair(self, run_id: str, dataset: str, metric: str, params: dict[str, str] | None = None) -> str:
        # the export's filters run in the page; a query string carries them there
        return f"{self.up}{self.pair_dir(run_id, dataset, metric)}/index.html{_query(params)}"

    def sample(self, run_id: str, dataset: str, metric: str, sample_id: str) -> str:
        """The pair's one sample page, told which sample (and its chunk file) after ``#``."""
        chunk = sample_chunk(sample_id, self.chunks.get((run_id, dataset, metric), 1))
        return f"{self.up}{self.pair_dir(run_id, dataset, metric)}/{SAMPLE_PAGE}#{chunk}/{segment(sample_id)}"

    def media_file(self, run_id: str, dataset: str, key: str, part: str, ext: str) -> str:
        """The media file's path from the export's root."""
        return f"{self.run_dir(run_id)}/media/{safe_name(dataset)}/{safe_name(key)}-{safe_name(part)}.{safe_name(ext)}"

    def media(self, run_id: str, dataset: str, key: str, part: str, ext: str = "") -> str:
        return self.up + self.media_file(run_id, dataset, key, part, ext or "bin")

    def compare(self, params: dict[str, str] | None = None) -> str | None:
        """Two models of one run on one pair: a page of the export, beside the pair's samples. Two runs, or a
        comparison to fill in, need the server (None: no link)."""
        if not params:
            return None
        (run_a, _, model_a), (run_b, _, model_b) = (params.get(k, "").partition(":") for k in ("a", "b"))
        dataset, sep, metric = params.get("pair", "").rpartition("/")
        if run_a != run_b or not (sep and dataset and metric and model_a and model_b):
            return None
        return f"{self.up}{self.pair_dir(run_a, dataset, metric)}/{compare_file(model_a, model_b)}"

    def static(self, name: str) -> str:
        return f"{self.up}static/{name}"
