// The home screen's upload section: files chosen or dropped (anywhere on the screen), a voice note
// from the microphone, and this visit's uploads with their progress.
import * as api from "./api.js";
import { h, percent, stamp, toast } from "./dom.js";
import * as i18n from "./i18n.js";
import { t } from "./i18n.js";
import * as recorder from "./recorder.js";
import { handleRefusal, loadOptions, onSignOut, refreshView, refusalWords, state } from "./shell.js";

export function uploadSection() {
  const input = h("input", {
    id: "file-input",
    type: "file",
    multiple: true,
    accept: "audio/*,video/*,.m4a,.mp3,.ogg,.opus,.oga,.webm,.wav,.flac,.aac,.amr,.mp4,.mov,.mkv",
    class: "visually-hidden",
    onchange: () => {
      sendFiles(Array.from(input.files));
      input.value = "";
    },
  });
  const zone = h(
    "div",
    { class: "drop", id: "drop" },
    h("p", { class: "drop-words" }, t("upload.drop")),
    h("p", { class: "drop-or" }, t("upload.or")),
    h(
      "div",
      { class: "drop-actions" },
      h("label", { for: "file-input", class: "button primary" }, t("upload.choose")),
      input,
      recordControls(),
    ),
  );
  const fields = h(
    "div",
    { class: "fields" },
    h(
      "div",
      { class: "field" },
      h("label", { for: "upload-title" }, t("upload.titleLabel")),
      h("input", { id: "upload-title", type: "text", maxlength: "500", "aria-describedby": "upload-title-hint" }),
      h("p", { class: "hint", id: "upload-title-hint" }, t("upload.titleHint")),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "upload-language" }, t("upload.language")),
      h("select", { id: "upload-language" }, h("option", { value: "" }, t("upload.autoLanguage"))),
    ),
  );
  return h(
    "section",
    { class: "card", "aria-labelledby": "upload-heading" },
    h("h1", { id: "upload-heading" }, t("upload.title")),
    zone,
    fields,
    h("ul", { class: "uploads", id: "uploads", "aria-live": "polite" }, state.uploads.map(uploadRow)),
  );
}

export function fillLanguages(options) {
  const select = document.getElementById("upload-language");
  if (!select || select.options.length > 1) return;
  const named = options.languages.map((code) => ({ code, name: i18n.languageName(code) }));
  named.sort((a, b) => a.name.localeCompare(b.name, i18n.lang()));
  for (const { code, name } of named) select.append(h("option", { value: code }, name));
}

// Files dropped anywhere on the list page are uploaded; elsewhere the browser would open them.
export function wireDrops() {
  let depth = 0;
  const zone = () => document.getElementById("drop");
  const carriesFiles = (ev) => Boolean(ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes("Files"));
  document.addEventListener("dragenter", (ev) => {
    if (!zone() || !carriesFiles(ev)) return;
    ev.preventDefault();
    depth++;
    zone().classList.add("over");
  });
  document.addEventListener("dragleave", (ev) => {
    if (!carriesFiles(ev)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0 && zone()) zone().classList.remove("over");
  });
  document.addEventListener("dragover", (ev) => {
    if (zone() && carriesFiles(ev)) ev.preventDefault();
  });
  document.addEventListener("drop", (ev) => {
    if (!zone() || !carriesFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    zone().classList.remove("over");
    const files = Array.from((ev.dataTransfer && ev.dataTransfer.files) || []);
    if (files.length) sendFiles(files);
  });
}

function stem(name) {
  return String(name || "").replace(/\.[A-Za-z0-9]{1,5}$/, "");
}

async function sendFiles(files, fixedTitle) {
  const titleBox = document.getElementById("upload-title");
  const typed = titleBox ? titleBox.value.trim() : "";
  const languageBox = document.getElementById("upload-language");
  const language = languageBox ? languageBox.value : "";
  const options = await loadOptions().catch(() => null);
  const jobs = files.map((file) => {
    const title = fixedTitle || (files.length === 1 && typed ? typed : typed ? typed + " — " + stem(file.name) : stem(file.name));
    return { id: "u" + Math.random().toString(36).slice(2), name: file.name, progress: 0, phase: "sending", file, title };
  });
  state.uploads.unshift(...jobs);
  if (titleBox) titleBox.value = "";
  redrawUploads();
  for (const job of jobs) {
    if (options && job.file.size > options.max_upload_bytes) {
      finish(job, "refused", refusalWords({ code: "too_large" }, job.name));
      continue;
    }
    try {
      const made = await api.upload(job.file, { title: job.title, language }, (p) => {
        job.progress = p;
        job.phase = p >= 1 ? "checking" : "sending";
        redrawUpload(job);
      });
      job.record = made;
      finish(job, "done", t("upload.sent"));
      if (state.view === "home") refreshView(); // the list, read again
    } catch (err) {
      const words = handleRefusal(err, job.name);
      if (words === null) return;
      finish(job, "refused", words);
    }
  }
}

function finish(job, phase, message) {
  job.phase = phase;
  job.message = message;
  job.file = null;
  redrawUpload(job);
}

function redrawUploads() {
  const list = document.getElementById("uploads");
  if (list) list.replaceChildren(...state.uploads.map(uploadRow));
}

function redrawUpload(job) {
  const row = document.querySelector(`li.upload[data-job="${job.id}"]`);
  if (row) row.replaceWith(uploadRow(job));
}

function uploadRow(job) {
  const dismiss = h("button", {
    type: "button",
    class: "link",
    onclick: () => {
      state.uploads = state.uploads.filter((j) => j !== job);
      redrawUploads();
    },
  }, t("upload.dismiss"));
  const busy = job.phase === "sending" || job.phase === "checking";
  return h(
    "li",
    { class: "upload " + job.phase, "data-job": job.id, "data-phase": job.phase },
    h("span", { class: "upload-name" }, job.name),
    busy
      ? h("progress", { max: "1", value: String(job.progress), "aria-label": t("upload.sending", { percent: percent(job.progress) }) })
      : null,
    h(
      "span",
      { class: "upload-state", role: job.phase === "refused" ? "alert" : null },
      job.phase === "sending"
        ? t("upload.sending", { percent: percent(job.progress) })
        : job.phase === "checking"
          ? t("upload.checking")
          : job.message,
    ),
    job.phase === "done" && job.record ? h("a", { href: "#/r/" + job.record.id }, t("list.open")) : null,
    busy ? null : dismiss,
  );
}

// A voice note: record, then stop (sent like a file) or discard.
function recordControls() {
  const box = h("div", { class: "recorder", id: "recorder" });
  drawRecorder(box);
  return box;
}

function drawRecorder(box) {
  box = box || document.getElementById("recorder");
  if (!box) return;
  if (!state.recording) {
    box.replaceChildren(h("button", { type: "button", id: "record-start", onclick: startRecording }, t("upload.record")));
    return;
  }
  const elapsed = Math.floor((Date.now() - state.recording.started) / 1000);
  box.replaceChildren(
    h("span", { class: "recording", role: "timer" }, t("record.recording", { time: stamp(elapsed) })),
    h("button", { type: "button", class: "primary", id: "record-stop", onclick: stopRecording }, t("record.stop")),
    h("button", { type: "button", id: "record-cancel", onclick: cancelRecording }, t("record.cancel")),
  );
}

async function startRecording() {
  if (!recorder.supported()) return toast(t("record.unsupported"));
  try {
    state.recording = await recorder.start();
  } catch (_) {
    return toast(t("record.denied"));
  }
  drawRecorder();
  state.recordingTimer = setInterval(() => drawRecorder(), 1000);
}

async function stopRecording() {
  const rec = state.recording;
  if (!rec) return;
  clearInterval(state.recordingTimer);
  state.recording = null;
  drawRecorder();
  const when = new Intl.DateTimeFormat(i18n.lang(), { dateStyle: "medium", timeStyle: "short" }).format(new Date());
  const name = t("record.name", { when });
  const file = await rec.stop(name.replace(/[\\/:*?"<>|]/g, "-"));
  const typed = document.getElementById("upload-title");
  sendFiles([file], typed && typed.value.trim() ? typed.value.trim() : name);
}

function cancelRecording() {
  if (!state.recording) return;
  clearInterval(state.recordingTimer);
  state.recording.cancel();
  state.recording = null;
  drawRecorder();
}

onSignOut(cancelRecording);
