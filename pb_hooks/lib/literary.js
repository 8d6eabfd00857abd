// The literary text: what its step reads and writes, and what senders see of it.
//
// The step (sidecar/steps/literary.py) reads the transcript under its claim on the
// recording's `literary` row and writes the edited text as the recording's `texts` row
// of kind `literary`: `content` (paragraphs apart by a blank line) and `segments`, one
// per paragraph {start, end, speaker, text}; with a language model configured, each also
// says who made its words (`proofread`: "model" or "rules") and, for the rules', why the
// model's were not kept (`reason`). Its queue row says whether that text is
// up to date: `done`, or `queued` again when the owner corrected the transcript.
// Required by lib/records.js (the poll): it requires nothing that requires that.
const args = require("./args.js");
const stages = require("./stages.js");

// Paragraphs a text may hold (a six-hour recording makes a few thousand).
const MAX_PARAGRAPHS = 100000;
// Why a paragraph kept the rules' words, at most this long.
const MAX_REASON = 500;

function parsedJson(raw) {
  const text = toString(raw);
  if (!text || text === "null") return null;
  return JSON.parse(text);
}

// The recording's row of the literary queue, or null.
function rowOf(app, recordId) {
  const found = app.findRecordsByFilter("literary", "record = {:id}", "", 1, 0, { id: recordId });
  return found.length > 0 ? found[0] : null;
}

// The recording's literary text (its texts row), or null.
function textOf(app, recordId) {
  const rows = app.findRecordsByFilter("texts", "record = {:id} && kind = 'literary'", "", 1, 0, { id: recordId });
  return rows.length > 0 ? rows[0] : null;
}

// The recording's transcript (its texts row), or null.
function transcriptOf(app, recordId) {
  const rows = app.findRecordsByFilter("texts", "record = {:id} && kind = 'transcript'", "", 1, 0, { id: recordId });
  return rows.length > 0 ? rows[0] : null;
}

// The step's input: the transcript of the row's recording, and its owner's dictionary of
// topics (the names a language model may correct a misheard word to).
function source(tx, row) {
  const rec = tx.findRecordById("audio_records", row.getString("record"));
  const t = transcriptOf(tx, rec.id);
  const segments = t ? parsedJson(t.get("segments")) : null;
  const dictionary = tx.findRecordsByFilter("topics", "owner = {:o}", "name", 0, 0, { o: rec.getString("owner") });
  return {
    text: t ? t.getString("content") : "",
    segments: Array.isArray(segments) ? segments : [],
    language: rec.getString("language"),
    topics: dictionary.map((d) => d.getString("name")),
  };
}

function finite(v) {
  return typeof v === "number" && isFinite(v) ? Math.min(Math.max(v, 0), 1e7) : null;
}

// The step's answer, checked before the fence: {content, segments, language, document,
// transcriptDocument}. Sent as JSON, or as a form whose `payload` holds the JSON, whose `document`
// file is the text's DOCX and whose `transcript_document` file is the transcript's.
function request(e, form) {
  let body = form;
  const documents = { document: null, transcript_document: null };
  if (typeof form.payload === "string") {
    try {
      body = JSON.parse(form.payload);
    } catch (_) {
      throw new args.Invalid("'payload' must be JSON");
    }
    const multipart = String(e.request.header.get("Content-Type") || "").indexOf("multipart/form-data") === 0;
    for (const name in documents) {
      const files = multipart ? e.findUploadedFiles(name) || [] : [];
      if (files.length > 1) throw new args.Invalid("at most one '" + name + "' file");
      documents[name] = files.length > 0 ? files[0] : null;
    }
  }
  const out = checked(body);
  out.document = documents.document;
  out.transcriptDocument = documents.transcript_document;
  return out;
}

function checked(body) {
  const content = typeof body.content === "string" ? body.content : null;
  if (content === null) throw new args.Invalid("'content' must be text");
  if (!Array.isArray(body.segments) || body.segments.length > MAX_PARAGRAPHS) {
    throw new args.Invalid("'segments' must be a list of at most " + MAX_PARAGRAPHS + " paragraphs");
  }
  const segments = body.segments.map((p, i) => {
    const start = finite(p && p.start);
    const end = finite(p && p.end);
    if (start === null || end === null || end < start || typeof (p && p.text) !== "string") {
      throw new args.Invalid("paragraph " + i + " must be {start, end, speaker?, text} with start <= end");
    }
    const out = { start: start, end: end, speaker: typeof p.speaker === "string" && p.speaker !== "" ? p.speaker : null, text: p.text };
    if (p.proofread === "model" || p.proofread === "rules") out.proofread = p.proofread;
    if (typeof p.reason === "string" && p.reason !== "") out.reason = p.reason.slice(0, MAX_REASON);
    return out;
  });
  const language = args.optText(body, "language", 10);
  return { content: content, segments: segments, language: language || "" };
}

// Written in the claim's transaction: the texts row of kind literary, made or replaced, and the
// transcript's Word document on the transcript's row. Both are made from the transcript the step
// read: a correction since would have queued the row again, taking the claim (and this write) away.
function store(tx, row, a) {
  const recordId = row.getString("record");
  const found = textOf(tx, recordId);
  const t = found || new Record(tx.findCollectionByNameOrId("texts"));
  t.set("record", recordId);
  t.set("kind", "literary");
  t.set("content", a.content);
  t.set("segments", a.segments);
  // A document of an earlier text would no longer be this one: replaced, or removed.
  t.set("document", a.document || null);
  tx.save(t);
  const transcript = a.transcriptDocument ? transcriptOf(tx, recordId) : null;
  if (transcript) {
    transcript.set("document", a.transcriptDocument);
    tx.save(transcript);
  }
  tx.db().newQuery("UPDATE literary SET language = {:language} WHERE id = {:id}").bind({ id: row.id, language: a.language }).execute();
}

// What the poll and the list say of it: "ready" (the text is up to date), "pending" (it is
// being made, or made again after a correction), or null (none is made for this recording).
function status(app, recordId) {
  const row = rowOf(app, recordId);
  if (!row) return null;
  const done = row.getString("state") === stages.DONE;
  if (done && textOf(app, recordId)) return "ready";
  return done ? null : "pending";
}

function stamp(sec) {
  const s = Math.floor(sec);
  const two = (n) => (n < 10 ? "0" : "") + n;
  return (s >= 3600 ? Math.floor(s / 3600) + ":" : "") + two(Math.floor(s / 60) % 60) + ":" + two(s % 60);
}

// The text in Markdown: the recording's title as the heading, each paragraph with its start
// time, the speaker in bold at each turn.
function markdown(title, segments) {
  const out = [];
  if (title) out.push("# " + title);
  let speaker = null;
  for (const p of segments) {
    const named = p.speaker && p.speaker !== speaker ? "**" + p.speaker + ":** " : "";
    speaker = p.speaker || null;
    out.push("*[" + stamp(p.start) + "]* " + named + p.text);
  }
  return out.join("\n\n") + (out.length > 0 ? "\n" : "");
}

// The text as the sender downloads it (GET /api/transcriber/records/{id}/text?format=): null while
// there is none; else {type, body} for txt and md, {json} for json ({content, paragraphs: [{start,
// end, speaker, text}]}, what the page shows), {row, file} for docx (null when it has none).
function rendered(app, rec, format) {
  if (status(app, rec.id) !== "ready") return null;
  const t = textOf(app, rec.id);
  if (!t) return null;
  if (format === "docx") {
    const file = t.getString("document");
    return file ? { row: t, file: file } : null;
  }
  if (format === "json") {
    const paragraphs = parsedJson(t.get("segments"));
    return { json: { content: t.getString("content"), paragraphs: Array.isArray(paragraphs) ? paragraphs : [] } };
  }
  if (format === "md") {
    const segments = parsedJson(t.get("segments"));
    return { type: "text/markdown; charset=utf-8", body: markdown(rec.getString("title"), Array.isArray(segments) ? segments : []) };
  }
  const content = t.getString("content");
  return { type: "text/plain; charset=utf-8", body: content + (content ? "\n" : "") };
}

module.exports = {
  rowOf: rowOf, textOf: textOf, source: source, request: request, store: store, status: status, rendered: rendered,
};
