// One recording's page (#/r/{id}): its title (renamed here), its state while it is transcribed, its
// audio, and once done its transcript (transcript.js).
import * as api from "./api.js";
import { h } from "./dom.js";
import * as i18n from "./i18n.js";
import { t } from "./i18n.js";
import { showRecordAudio } from "./player.js";
import { latest, main, sayRefusal, state, whenLive } from "./shell.js";
import { haltText, progressBar, resumeButton, statusBadge, watchResumable } from "./status.js";
import { briefCard, drawTranscript, literaryChanged } from "./transcript.js";

export async function renderRecord(id) {
  state.view = "record";
  state.record = { id, poll: null, cues: null, loading: false };
  main().replaceChildren(
    h("p", { class: "record-nav" },
      h("a", { href: "#/", class: "back" }, "← " + t("record.back")),
      " ",
      // While the server is away (a restart, a dropped line), this says so; the page catches up when it is back.
      h("span", { class: "live" + (state.offline ? " off" : ""), id: "live" }, state.offline ? t("list.offline") : t("list.live"))),
    h("div", { id: "record-head" }),
    h("div", { id: "record-status" }),
    h("div", { id: "record-audio" }),
    h("div", { id: "record-body" }),
  );
  await refreshRecord(id);
}

let recordToken = 0;
async function refreshRecord(id) {
  const mine = ++recordToken; // of two reads under way, the later one is shown
  let poll;
  try {
    poll = await latest.read(() => api.poll(id));
  } catch (err) {
    if (err.status === 404) {
      main().replaceChildren(
        h("p", {}, h("a", { href: "#/", class: "back" }, "← " + t("record.back"))),
        h("h1", {}, t("record.notFound")),
      );
      return;
    }
    sayRefusal(err);
    return;
  }
  if (mine !== recordToken || !state.record || state.record.id !== id) return;
  state.record.poll = poll;
  drawRecordHead();
  showRecordStatus();
}

function drawRecordHead(editing) {
  const rec = state.record;
  const head = document.getElementById("record-head");
  if (!head || !rec || !rec.poll) return;
  const poll = rec.poll;
  if (editing) {
    const input = h("input", { id: "rename-input", type: "text", maxlength: "500", value: poll.title });
    const form = h(
      "form",
      { class: "rename" },
      h("label", { for: "rename-input" }, t("record.renameLabel")),
      input,
      h("button", { type: "submit", class: "primary" }, t("record.save")),
      h("button", { type: "button", onclick: () => drawRecordHead(false) }, t("record.cancelEdit")),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        rec.poll = Object.assign(rec.poll, await latest.read(() => api.rename(rec.id, input.value)));
        drawRecordHead(false);
      } catch (err) {
        sayRefusal(err);
      }
    });
    head.replaceChildren(form);
    input.focus();
    return;
  }
  document.title = (poll.title || t("list.untitled")) + " — transcriber";
  rec.shownLanguage = poll.language || "";
  const meta = [t("record.uploaded", { when: i18n.dateTime(poll.created) })];
  if (poll.language) meta.push(i18n.languageName(poll.language));
  head.replaceChildren(
    h("div", { class: "title-row" },
      h("h1", { id: "record-title" }, poll.title || t("list.untitled")),
      h("button", { type: "button", class: "link", id: "rename", onclick: () => drawRecordHead(true) }, t("record.rename"))),
    h("p", { class: "meta" }, meta.join(" · ")),
  );
}

function showRecordStatus() {
  const rec = state.record;
  const box = document.getElementById("record-status");
  if (!box || !rec || !rec.poll) return;
  const poll = rec.poll;
  const title = document.getElementById("record-title");
  // A new title, or the language found while recognition runs: the head is drawn again (not while renaming).
  const renaming = document.getElementById("rename-input");
  if (!renaming && title && (title.textContent !== (poll.title || t("list.untitled")) || rec.shownLanguage !== (poll.language || ""))) {
    drawRecordHead(false);
  }
  if (poll.status === "done" && !poll.halted) {
    box.replaceChildren();
    if (!rec.cues && !rec.loading) loadTranscript();
    // A brief written (or edited), or the word that none is coming, while the transcript is open: only its
    // card is drawn again.
    else if (rec.cues && !rec.loading && ((poll.brief || "") !== (rec.brief || "") || missingOf(poll) !== rec.briefMissing)) {
      refreshBrief();
    }
    // The literary text became ready (or is made again): its toggle and view are drawn again.
    if (rec.cues && !rec.loading && (poll.literary || null) !== (rec.literaryShown || null)) literaryChanged(rec);
    return;
  }
  const parts = [h("div", { class: "record-state" }, statusBadge(poll), progressBar(poll))];
  if (poll.halted) {
    const more = poll.resumable && poll.halt_code !== "over_quota" ? " " + t("halt.canResume") : "";
    parts.push(h("p", { class: "halt" }, haltText(poll), more));
    parts.push(resumeButton(poll));
  } else {
    parts.push(h("p", { class: "hint" }, t("record.waitingText")));
  }
  box.replaceChildren(h("div", { class: "card", id: "status-card" }, ...parts));
  watchResumable([poll]);
  showRecordAudio();
}

// The open recording's JSON export, or null (a refusal said in words unless `quiet`, or the
// sender moved on to another recording meanwhile).
async function fetchExport(quiet) {
  const rec = state.record;
  rec.loading = true;
  let body = null;
  try {
    body = await api.transcriptJson(rec.id);
  } catch (err) {
    if (!quiet) sayRefusal(err);
  }
  rec.loading = false;
  return state.record === rec ? body : null;
}

async function loadTranscript() {
  const rec = state.record;
  const body = await fetchExport(false);
  if (!body) return;
  // The cues the timed exports are made of (the JSON export's `cues`): the page derives none of its own.
  rec.cues = Array.isArray(body.cues) ? body.cues : [];
  rec.text = body.text || "";
  takeBrief(rec, body);
  drawTranscript();
}

async function refreshBrief() {
  const rec = state.record;
  const body = await fetchExport(true);
  if (!body) return;
  takeBrief(rec, body);
  const card = briefCard(rec);
  const old = document.getElementById("brief");
  if (old && card) old.replaceWith(card);
  else if (old) old.remove();
  else if (card) document.querySelector(".transcript-layout .right")?.prepend(card);
}

// Why the poll says there is no brief (a code the page has words for), or "".
function missingOf(poll) {
  const why = poll && poll.brief_missing_reason;
  return ["no_speech", "nothing_usable", "insights_halted"].indexOf(why) >= 0 ? why : "";
}

function takeBrief(rec, body) {
  rec.briefMissing = missingOf(rec.poll);
  rec.brief = typeof body.brief === "string" ? body.brief : "";
  rec.quotes = Array.isArray(body.quotes) ? body.quotes : [];
  rec.topics = Array.isArray(body.topics) ? body.topics.filter((x) => typeof x === "string") : [];
}

whenLive("record", {
  refresh() {
    if (state.record) refreshRecord(state.record.id);
  },
  status(poll) {
    if (state.record && state.record.id === poll.id) {
      state.record.poll = Object.assign({}, state.record.poll, poll);
      showRecordStatus();
    }
  },
});
