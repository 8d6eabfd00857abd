// The finished transcript beside its player: its lines (a click plays from there), the brief that
// quotes them, the search, and the downloads.
import * as api from "./api.js";
import { h, stamp } from "./dom.js";
import { speakerLabel, t } from "./i18n.js";
import { audioKind, audioNote, playAt, playerOf } from "./player.js";
import { sayRefusal, state } from "./shell.js";

// The Word document (`word`): the transcript's is made with the literary text, so it is offered
// once the poll's `literary` is ready (while it is pending, shown as being made).
const FORMATS = [
  { format: "txt", label: "TXT" },
  { format: "srt", label: "SRT" },
  { format: "vtt", label: "WebVTT" },
  { format: "json", label: "JSON" },
  { format: "docx", label: "DOCX", word: true },
];
// The literary text's downloads (GET …/text?format=).
const TEXT_FORMATS = [
  { format: "txt", label: "TXT" },
  { format: "md", label: "Markdown" },
  { format: "docx", label: "DOCX", word: true },
];

// The transcript's downloads as the poll allows them: its Word document only where the service makes one.
function transcriptFormats(rec) {
  const literary = rec.poll ? rec.poll.literary : null;
  return FORMATS.filter((f) => !f.word || literary === "ready" || literary === "pending")
    .map((f) => (f.word && literary !== "ready" ? Object.assign({ pending: true }, f) : f));
}

// Which of the two texts the page shows: the transcript, or the literary text ("text") once the
// service makes one (the poll's `literary`: ready or pending).
function shown(rec) {
  return rec.view === "text" && rec.poll && rec.poll.literary ? "text" : "transcript";
}

function viewToggle(rec) {
  if (!rec.poll || !rec.poll.literary) return null;
  const button = (view, label) => h("button", {
    type: "button", class: "view", "data-view": view, "aria-pressed": String(shown(rec) === view),
    onclick: () => showView(view),
  }, label);
  return h("div", { class: "view-toggle", role: "group", "aria-label": t("view.label") },
    button("transcript", t("view.transcript")), button("text", t("view.text")));
}

async function showView(view) {
  const rec = state.record;
  rec.view = view;
  if (view === "text" && rec.poll.literary === "ready" && !rec.paragraphs) await loadText(rec);
  if (state.record === rec) drawTranscript();
}

async function loadText(rec) {
  try {
    const body = await api.textJson(rec.id);
    rec.paragraphs = Array.isArray(body.paragraphs) ? body.paragraphs : [];
  } catch (err) {
    sayRefusal(err);
  }
}

// The literary text changed (made, or made again after a correction): read afresh when shown.
export function literaryChanged(rec) {
  rec.paragraphs = null;
  if (shown(rec) === "text" && rec.poll.literary === "ready") showView("text");
  else drawTranscript();
}

function textSection(rec) {
  let content;
  if (rec.poll.literary !== "ready" || !rec.paragraphs) {
    content = h("p", { class: "hint", id: "text-pending" }, t("text.pending"));
  } else if (rec.paragraphs.length === 0) {
    content = h("p", {}, t("text.empty"));
  } else {
    let speaker = null;
    content = h("div", { class: "plain literary", id: "paragraphs" }, rec.paragraphs.map((p) => {
      const start = Number.isFinite(Number(p.start)) ? Math.max(0, Number(p.start)) : 0;
      const named = p.speaker && p.speaker !== speaker ? h("span", { class: "speaker" }, speakerLabel(p.speaker)) : null;
      speaker = p.speaker || null;
      return h("p", { class: "paragraph" },
        h("button", { type: "button", class: "line-button para-time", title: t("transcript.playFrom", { time: stamp(start) }),
          onclick: () => playAt(start) }, h("span", { class: "time" }, stamp(start))),
        " ", named, named ? " " : null, h("span", { class: "text" }, String(p.text || "")));
    }));
  }
  return h("section", { class: "card transcript", "aria-labelledby": "transcript-heading" },
    h("div", { class: "title-row" }, h("h2", { id: "transcript-heading" }, t("text.title")), viewToggle(rec)),
    h("p", { class: "hint" }, t("text.hint")), content);
}

export function drawTranscript() {
  const rec = state.record;
  const body = document.getElementById("record-body");
  if (!body) return;
  rec.literaryShown = rec.poll ? rec.poll.literary || null : null;
  const kind = audioKind(rec.poll);
  const player = kind === "player" ? playerOf(rec) : [audioNote(kind)];
  const asText = shown(rec) === "text";

  const speakers = [];
  const lines = rec.cues.map((cue, i) => {
    let speaker = null;
    if (cue.speaker) {
      if (!speakers.includes(cue.speaker)) speakers.push(cue.speaker);
      speaker = h("span", { class: "speaker s" + (speakers.indexOf(cue.speaker) % 6) }, speakerLabel(cue.speaker));
    }
    return h(
      "li",
      { class: "line", "data-index": String(i), "data-start": String(cue.start) },
      h("button", { type: "button", class: "line-button", title: t("transcript.playFrom", { time: stamp(cue.start) }),
        onclick: () => playFrom(i) },
      h("span", { class: "time" }, stamp(cue.start)),
      speaker,
      h("span", { class: "text" }, cue.text)),
    );
  });
  const list = rec.cues.length
    ? h("ol", { class: "lines", id: "lines" }, lines)
    : h("div", { class: "plain", id: "lines" },
      rec.text ? rec.text.split(/\n{2,}/).map((p) => h("p", {}, p)) : h("p", {}, t("record.noSpeech")));
  const count = h("p", { class: "hint", id: "search-count", role: "status" });
  const search = h("input", {
    id: "search",
    type: "search",
    placeholder: t("transcript.search"),
    "aria-label": t("transcript.search"),
    oninput: () => filterLines(search.value, count),
  });
  const formats = asText ? (rec.poll.literary === "ready" ? TEXT_FORMATS : []) : transcriptFormats(rec);
  const downloads = h("div", { class: "downloads", role: "group", "aria-labelledby": "downloads-label" },
    h("span", { id: "downloads-label" }, t("transcript.download")),
    formats.map(({ format, label, word, pending }) =>
      h("button", { type: "button", class: "download", "data-format": format, "data-of": asText ? "text" : "transcript",
        title: word ? (pending ? t("download.wordPending") : t("download.word")) : null, disabled: pending === true,
        onclick: () => download(format, asText ? "text" : "transcript") }, label)));
  // The player stays in sight while the transcript scrolls: beside it on a wide screen, above it on a phone.
  body.replaceChildren(
    h(
      "div",
      { class: "transcript-layout" },
      h("div", { class: "left" },
        h("aside", { class: "side card", "aria-label": t("player.label") }, ...player),
        h("div", { class: "tools card" }, downloads, rec.cues.length && !asText ? search : null, asText ? null : count)),
      h("div", { class: "right" },
        briefCard(rec),
        asText ? textSection(rec) : h("section", { class: "card transcript", "aria-labelledby": "transcript-heading" },
          h("div", { class: "title-row" }, h("h2", { id: "transcript-heading" }, t("transcript.title")), viewToggle(rec)),
          list)),
    ),
  );
  document.getElementById("record-audio")?.replaceChildren(); // its player, if any, moved into the aside
}

// The brief and topics, when the service wrote them: each sentence with the quote
// that grounds it, a button that plays the recording from the quote's time.
export function briefCard(rec) {
  if (!rec.brief && rec.topics.length === 0 && !rec.briefMissing) return null;
  const sentences = rec.quotes.length
    ? h("ul", { class: "brief-lines" }, rec.quotes.map((q) => {
      const start = Number.isFinite(Number(q.start)) ? Math.max(0, Number(q.start)) : 0;
      return h("li", {},
        h("span", { class: "sentence" }, String(q.sentence || "")),
        " ",
        h("button", { type: "button", class: "quote", title: t("transcript.playFrom", { time: stamp(start) }),
          onclick: () => playAt(start) },
        h("span", { class: "time" }, stamp(start)), " «" + String(q.quote || "") + "»"));
    }))
    : rec.brief ? h("p", {}, rec.brief)
      // The step ended without one (the poll's brief_missing_reason): said, not left empty.
      : rec.briefMissing ? h("p", { class: "brief-none" }, t("brief.none") + " " + t("brief.noneWhy." + rec.briefMissing))
        : null;
  const topics = rec.topics.length
    ? h("ul", { class: "topics", "aria-label": t("brief.topics") }, rec.topics.map((name) => h("li", { class: "topic" }, name)))
    : null;
  return h("section", { class: "card brief", id: "brief", "aria-labelledby": "brief-heading" },
    h("h2", { id: "brief-heading" }, t("brief.title")), sentences, topics,
    rec.brief ? h("p", { class: "hint" }, t("brief.hint")) : null);
}

async function playFrom(index) {
  const rec = state.record;
  const cue = rec && rec.cues[index];
  if (cue) await playAt(cue.start);
}

function filterLines(query, count) {
  const q = query.trim().toLocaleLowerCase();
  let shown = 0;
  for (const li of document.querySelectorAll("#lines li.line")) {
    const cue = state.record.cues[Number(li.dataset.index)];
    const text = li.querySelector(".text");
    const label = cue.speaker ? cue.speaker + " " + speakerLabel(cue.speaker) : "";
    const hit = !q || (cue.text + " " + label).toLocaleLowerCase().includes(q);
    li.hidden = !hit;
    if (hit) shown++;
    text.replaceChildren(...highlight(cue.text, q));
  }
  count.textContent = q ? (shown ? t("transcript.matches", { count: shown }) : t("transcript.noMatches")) : "";
}

function highlight(text, q) {
  if (!q) return [text];
  const out = [];
  const lower = text.toLocaleLowerCase();
  let at = 0;
  for (let i = lower.indexOf(q); i >= 0; i = lower.indexOf(q, i + q.length)) {
    out.push(text.slice(at, i), h("mark", {}, text.slice(i, i + q.length)));
    at = i + q.length;
  }
  out.push(text.slice(at));
  return out;
}

async function download(format, what) {
  const rec = state.record;
  try {
    const blob = await api.exportBlob(rec.id, format, what);
    const base = (rec.poll && rec.poll.title ? rec.poll.title : rec.id).replace(/[\\/:*?"<>|\n\r\t]+/g, " ").trim();
    const a = h("a", { href: URL.createObjectURL(blob), download: (base || rec.id).slice(0, 120) + "." + format });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (err) {
    sayRefusal(err);
  }
}
