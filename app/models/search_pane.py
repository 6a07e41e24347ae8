"""The model manager's Hub search: repositories, their GGUF models with fit badges, drafts with verdicts.

Every request runs on :class:`HubSearchWorker`'s thread, so the window answers while the Hub does; results
show as they arrive (draft candidates one by one). Download pair hands a ``HubPair`` to the manager, which
downloads it with the catalog's progress, cancel and resume.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.models.search_worker import HubSearchWorker
from app.models.tables import button_row, new_table, set_cell
from app.models.workers import start_thread, stop_thread
from engine import ModelStore, format_bytes, hub_drafts, hub_search, hubpair

FIT_COLOURS = {"fits": "#1a7f37", "tight": "#9a6700", "too large": "#cf222e"}
VERDICT_COLOURS = {"compatible": "#1a7f37", "unchecked": "#9a6700", "incompatible": "#cf222e"}
HUB_PAIR, LOCAL_PAIR = "Download pair", "Pair with this draft"  # a Hub target; a file of the user's own


class SearchPane(QGroupBox):
    """Search box, repositories, models and drafts side by side.

    Signals:
        download_pair(hubpair.HubPair): the user chose a target and a draft to download as one unit.
        pair_local(Path, Path | GgufModel): a draft for a file of the user's own: on disk, or on the Hub.
    """

    download_pair = Signal(object)
    pair_local = Signal(object, object)
    search_requested = Signal(int, str, int)
    list_requested = Signal(int, str)
    drafts_requested = Signal(int, str, str)
    file_drafts_requested = Signal(int, str)

    def __init__(self, store: ModelStore, memory: tuple[int, int | None], parent: QWidget | None = None) -> None:
        super().__init__("Find a model on the Hub", parent)
        self.setObjectName("hub-search")
        self.requests = 0
        self.latest = {"search": -1, "list": -1, "drafts": -1}
        self.query = ""
        self.page: hub_search.SearchPage | None = None
        self.hits: list[str] = []
        self.repo: hub_search.RepoModels | None = None
        self.target: hub_search.GgufModel | None = None
        self.candidates: list[hub_drafts.Candidate] = []

        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Model name, e.g. qwen2.5 7b (GGUF repositories, most downloaded first)")
        self.search_box.returnPressed.connect(self.start_search)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.start_search)
        self.note = QLabel()
        self.note.setObjectName("hub-note")
        self.note.setWordWrap(True)

        self.repos_table = new_table(["Repository", "Downloads", "Access"], stretch="Repository")
        self.more_button = QPushButton("More results")
        self.more_button.clicked.connect(self.more)
        self.models_table = new_table(["Quant", "Size", "Fit", "Why", "Files"], stretch="Why")
        self.draft_button = QPushButton("Find a draft")
        self.draft_button.clicked.connect(self.find_drafts)
        self.drafts_table = new_table(["Verdict", "Draft", "Size", "Why"], stretch="Why")
        self.download_button = QPushButton("Download pair")
        self.download_button.clicked.connect(self._on_download_clicked)

        top = QHBoxLayout()
        top.addWidget(self.search_box, 1)
        top.addWidget(self.search_button)
        columns = QHBoxLayout()  # side by side, so the manager fits a 1280x720 screen
        for title, table, button, stretch in (
            ("Repositories", self.repos_table, self.more_button, 2),
            ("Models: size and fit on this machine", self.models_table, self.draft_button, 3),
            ("Drafts, best first", self.drafts_table, self.download_button, 3),
        ):
            col = QVBoxLayout()
            col.addWidget(QLabel(f"<b>{title}</b>"))
            col.addWidget(table)
            col.addLayout(button_row(button))
            columns.addLayout(col, stretch)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.note)
        layout.addLayout(columns)

        self.worker = HubSearchWorker(store, memory)
        self.search_requested.connect(self.worker.search)
        self.list_requested.connect(self.worker.list_repo)
        self.drafts_requested.connect(self.worker.drafts)
        self.file_drafts_requested.connect(self.worker.drafts_for_file)
        self.worker.searched.connect(self._on_searched)
        self.worker.listed.connect(self._on_listed)
        self.worker.candidate.connect(self._on_candidate)
        self.worker.drafts_found.connect(self._on_drafts)
        self.worker.failed.connect(self._on_failed)
        self.worker_thread = start_thread(self.worker, "hub-search")
        self.repos_table.itemSelectionChanged.connect(self._on_repo_selected)
        self.models_table.itemSelectionChanged.connect(self._update_buttons)
        self.drafts_table.itemSelectionChanged.connect(self._update_buttons)
        self._update_buttons()

    # -- requests ---------------------------------------------------------------------------------
    def _next(self, kind: str) -> int:
        self.requests += 1
        self.latest[kind] = self.requests
        return self.requests

    def show_note(self, text: str, *, error: bool = False) -> None:
        """A line under the search box (red for errors)."""
        self.note.setText(text)
        self.note.setStyleSheet("color:#cf222e;" if error else "")

    def start_search(self) -> None:
        """Search the Hub for the box's text (an empty box says what to type)."""
        query = " ".join(self.search_box.text().split())
        if not query:
            self.show_note("Type a model's name to search for, e.g. qwen2.5 7b.", error=True)
            return
        self.query, self.hits, self.page = query, [], None
        self.repos_table.setRowCount(0)
        self.show_note(f"Searching the Hub for “{query}”…")
        self.search_requested.emit(self._next("search"), query, 0)
        self._update_buttons()

    def more(self) -> None:
        """The next page of the current search."""
        if self.page is not None and self.page.more:
            self.show_note("Loading more results…")
            self.search_requested.emit(self._next("search"), self.query, self.page.page + 1)

    def list_repo(self, repo: str) -> None:
        """List ``repo``'s GGUF models."""
        self.repo, self.target, self.candidates = None, None, []
        self.models_table.setRowCount(0)
        self.drafts_table.setRowCount(0)
        self.show_note(f"Listing {repo}…")
        self.list_requested.emit(self._next("list"), repo)
        self._update_buttons()

    def find_drafts(self) -> None:
        """Look for drafts for the selected model."""
        model = self.selected_model()
        if model is None:
            return
        self.target, self.candidates = model.model, []
        self.drafts_table.setRowCount(0)
        self.show_note(f"Reading GGUF headers of draft candidates for {model.model.name} (no weights)…")
        self.drafts_requested.emit(self._next("drafts"), model.model.repo, model.model.first)
        self._update_buttons()

    def find_drafts_for_file(self, path: Path) -> None:
        """Look for drafts for a GGUF file of the user's own (an installed pair's target)."""
        self.target, self.candidates = None, []
        self.drafts_table.setRowCount(0)
        self.show_note(f"Reading GGUF headers of draft candidates for {path.name}: the model store and the Hub "
                       "(no weights)…")
        self.file_drafts_requested.emit(self._next("drafts"), str(path))
        self._update_buttons()

    # -- selection --------------------------------------------------------------------------------
    def selected_model(self) -> hub_search.ModelFit | None:
        rows = self.models_table.selectionModel().selectedRows()
        return self.repo.models[rows[0].row()] if rows and self.repo is not None else None

    def selected_candidate(self) -> hub_drafts.Candidate | None:
        rows = self.drafts_table.selectionModel().selectedRows()
        return self.candidates[rows[0].row()] if rows else None

    def _on_repo_selected(self) -> None:
        rows = self.repos_table.selectionModel().selectedRows()
        if rows:
            self.list_repo(self.hits[rows[0].row()])

    def _update_buttons(self) -> None:
        self.more_button.setEnabled(self.page is not None and self.page.more)
        self.draft_button.setEnabled(self.selected_model() is not None)
        c = self.selected_candidate()
        local = self.target is not None and not self.target.repo  # a file of the user's own
        self.download_button.setText(LOCAL_PAIR if local else HUB_PAIR)
        self.download_button.setEnabled(c is not None and (c.source == "hub" or local) and c.verdict != "incompatible"
                                        and self.target is not None)

    def _on_download_clicked(self) -> None:
        c = self.selected_candidate()
        if c is None or self.target is None:
            return
        if c.source == "disk":
            self.pair_local.emit(Path(self.target.first), Path(c.filename))
            return
        draft = hub_search.GgufModel(c.repo, c.filename.rsplit("/", 1)[-1], c.files or (c.filename,), c.size, c.quant)
        if self.target.repo:
            self.download_pair.emit(hubpair.HubPair(self.target, draft))
        else:
            self.pair_local.emit(Path(self.target.first), draft)

    # -- answers ----------------------------------------------------------------------------------
    def _on_searched(self, request: int, page: hub_search.SearchPage) -> None:
        if request != self.latest["search"]:
            return
        self.page = page
        t = self.repos_table
        for hit in page.hits:
            r = t.rowCount()
            t.insertRow(r)
            self.hits.append(hit.repo)
            set_cell(t, r, 0, hit.repo, tip=hit.repo)
            set_cell(t, r, 1, f"{hit.downloads:,}")
            access = "gated: HF_TOKEN" if hit.gated else "private" if hit.private else "open"
            set_cell(t, r, 2, access, colour="#9a6700" if hit.gated or hit.private else None)
        found = len(self.hits)
        self.show_note(f"{found} GGUF repositories for “{page.query}”" + (" (more available)" if page.more else "")
                       if found else f"No GGUF repositories match “{page.query}”.")
        self._update_buttons()

    def _on_listed(self, request: int, repo: hub_search.RepoModels) -> None:
        if request != self.latest["list"]:
            return
        self.repo = repo
        t = self.models_table
        t.setRowCount(len(repo.models))
        for r, m in enumerate(repo.models):
            set_cell(t, r, 0, m.model.quant)
            set_cell(t, r, 1, format_bytes(m.model.size))
            set_cell(t, r, 2, m.label, colour=FIT_COLOURS.get(m.label), bold=True)
            set_cell(t, r, 3, m.reason, tip=m.reason)
            parts = f" (+{len(m.model.files) - 1} parts)" if len(m.model.files) > 1 else ""
            set_cell(t, r, 4, m.model.first + parts, tip="\n".join(m.model.files))
        self.show_note(f"{repo.repo}: {len(repo.models)} GGUF models. " + (repo.note or
                       "Pick one and press Find a draft."), error=bool(repo.note))
        self._update_buttons()

    def _show_candidates(self) -> None:
        t = self.drafts_table
        t.setRowCount(len(self.candidates))
        for r, c in enumerate(self.candidates):
            set_cell(t, r, 0, c.verdict, colour=VERDICT_COLOURS.get(c.verdict), bold=True)
            where = f"{c.repo}/{c.filename}" if c.source == "hub" else f"on disk: {c.filename}"
            set_cell(t, r, 1, where, tip=where)
            set_cell(t, r, 2, format_bytes(c.size) if c.size else "?")
            set_cell(t, r, 3, c.reason, tip=c.reason)
        self._update_buttons()

    def _on_candidate(self, request: int, c: hub_drafts.Candidate) -> None:
        if request == self.latest["drafts"]:
            self.candidates.append(c)
            self._show_candidates()

    def _on_drafts(self, request: int, found: hub_drafts.DraftSearch) -> None:
        if request != self.latest["drafts"]:
            return
        self.target = found.target
        self.candidates = list(found.candidates)
        self._show_candidates()
        good = sum(c.compatible for c in found.candidates)
        self.show_note(found.advice or f"{good} compatible of {len(found.candidates)} candidates, best first; "
                       f"pick one and press {self.download_button.text()}.", error=bool(found.advice))

    def _on_failed(self, request: int, message: str) -> None:
        if request in self.latest.values():
            self.show_note(message, error=True)

    def shutdown(self) -> None:
        """Join the worker thread (a request under way finishes first)."""
        stop_thread(self.worker_thread)
