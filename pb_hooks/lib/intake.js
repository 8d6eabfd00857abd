// I1: accept one recording from a sender. Everything cheap to check is
// checked before anything is written; the record and its original file row
// are then created in one transaction, so a failure leaves nothing behind.
const deadlines = require("./deadlines.js");
const form = require("./form.js");
const journal = require("./journal.js");
const live = require("./live.js");
const media = require("./media.js");
const quotas = require("./quotas.js");
const records = require("./records.js");
const respond = require("./respond.js");
const settings = require("./settings.js");
const stages = require("./stages.js");
const titles = require("./titles.js");
const transitions = require("./transitions.js");

const MAX_TITLE = 500;
// H7: each text field is bounded in bytes before it is read, counted or
// decoded. A title of 500 characters is at most 2,000 bytes of UTF-8; up to
// 8 KB is read so that the refusal can say how many characters were sent.
const MAX_TITLE_BYTES = 4 * MAX_TITLE;
const TITLE_READ_BYTES = 8 * 1024;
const MAX_LANGUAGE_BYTES = 64;
// The file, a title and a language; a few more parts are tolerated (a client's
// empty extras), not thousands.
const MAX_PARTS = 10;

// H4: a recording whose header says nothing of its length is guessed at this
// many bytes a second (16 kbit/s: speech at a low bit rate), at most the
// longest recording accepted; the guess reserves no more than the sender's
// room left, and normalize measures the truth.
const GUESS_BYTES_PER_SECOND = 2000;

function maxDurationMs() {
  return settings.ms("intake", "max_duration");
}

// What the recording says of its length, or a guess: {ms, declared}.
function lengthOf(file, container) {
  const declared = media.declaredMs(file, container);
  if (declared !== null) return { ms: Math.min(declared, maxDurationMs()), declared: true };
  return { ms: Math.max(1000, Math.min(Math.ceil(file.size / GUESS_BYTES_PER_SECOND) * 1000, maxDurationMs())), declared: false };
}

function maxUploadBytes() {
  return settings.get("intake", "max_upload_mb") * 1024 * 1024;
}

function readHead(file, n) {
  const reader = file.reader.open();
  try {
    return toBytes(reader, n);
  } finally {
    reader.close();
  }
}

function tooLong(name, bound) {
  if (name === "title") {
    return new form.Refused(400, "title_too_long", "The title is longer than " + bound + " bytes; at most " + MAX_TITLE + " characters are accepted.");
  }
  return new form.Refused(400, "unknown_language", "Unknown language (longer than " + bound + " bytes): use an ISO 639-1 code such as 'ru' or 'en', or leave it out to have the language found.");
}

// Whether the client waits for "100 Continue" before it sends the body: then a refusal
// now costs it no upload at all (Go sends the 100 only when the body is first read).
function waitsToSend(e) {
  return String(e.request.header.get("Expect") || "").toLowerCase() === "100-continue";
}

function create(e) {
  const ctype = String(e.request.header.get("Content-Type") || "");
  if (ctype.toLowerCase().indexOf("multipart/form-data") !== 0) {
    return respond.fail(e, 400, "not_multipart", "Send the recording as multipart/form-data with a 'file' field.");
  }
  if (waitsToSend(e)) {
    const over = quotas.beforeReading($app, e.auth.id, respond.nowMs());
    if (over) return quotas.refuse(e, over);
  }
  // LA6: this route alone reads a body for up to [intake] read_timeout (server.pb.js).
  deadlines.allowBody(e, settings.ms("intake", "read_timeout"));
  let upload;
  try {
    upload = form.read(e, {
      file: "file",
      fields: { title: TITLE_READ_BYTES, language: MAX_LANGUAGE_BYTES },
      tooLong: tooLong,
      maxParts: MAX_PARTS,
      maxMb: Math.floor(maxUploadBytes() / 1048576),
    });
  } catch (err) {
    if (err instanceof form.Refused) return respond.fail(e, err.status, err.code, err.message);
    throw err;
  }
  try {
    return accept(e, upload);
  } finally {
    form.discard(upload.file);
  }
}

function accept(e, upload) {
  if (!upload.file) {
    return respond.fail(e, 400, "missing_file", "The request has no 'file' field with the recording.");
  }
  for (const part of upload.unknown) {
    if (part.file) return respond.fail(e, 400, "unknown_field", "Unknown file field '" + part.name.slice(0, 50) + "': send the recording as 'file'.");
    return respond.fail(e, 400, "unknown_field", "Unknown form field '" + part.name.slice(0, 50) + "': only 'file', 'title' and 'language' are accepted.");
  }
  if (upload.file.size <= 0) {
    return respond.fail(e, 400, "empty_file", "The uploaded file is empty.");
  }
  if (upload.file.size > maxUploadBytes()) {
    return respond.fail(e, 413, "too_large", "The file is " + Math.ceil(upload.file.size / 1048576) + " MB; the limit is " + Math.floor(maxUploadBytes() / 1048576) + " MB.");
  }
  // A sender over a quota is refused before their file is parsed at all.
  const early = quotas.beforeReading($app, e.auth.id, respond.nowMs());
  if (early) return quotas.refuse(e, early);
  const file = $filesystem.fileFromPath(upload.file.path);
  file.originalName = upload.file.name;
  const container = media.sniff(readHead(file, 512));
  if (container === "") {
    return respond.fail(e, 415, "not_audio", "The file is not a known audio or video format (its first bytes match no audio/video container).");
  }

  const sent = upload.values.title || "";
  const title = sent.trim();
  const titleChars = Array.from(title).length; // characters, not UTF-16 units: an emoji is one
  if (titleChars > MAX_TITLE || toBytes(sent).length > MAX_TITLE_BYTES) {
    return respond.fail(e, 400, "title_too_long", "The title is " + titleChars + " characters; at most " + MAX_TITLE + " are accepted.");
  }
  const badTitle = titles.refusal(title);
  if (badTitle) return respond.fail(e, 400, badTitle.code, badTitle.message);

  // L3: an optional language hint, one of the schema's codes ("" or "auto": none).
  const language = String(upload.values.language || "").trim().toLowerCase();
  if (language !== "" && language !== "auto" && records.languages($app).indexOf(language) < 0) {
    return respond.fail(e, 400, "unknown_language",
      "Unknown language '" + language.slice(0, 20) + "': use an ISO 639-1 code such as 'ru' or 'en', or leave it out to have the language found.");
  }

  const owner = e.auth.id;
  const now = respond.nowMs();
  let length;
  let codec;
  try {
    length = lengthOf(file, container);
    // Whether the sender's page can play it as it is, decided once, here: if not, normalize makes a playable copy.
    codec = media.codecOf(file, container);
  } catch (err) {
    if (!(err && err.malformed)) throw err;
    return respond.fail(e, 415, "not_audio", "The file is not readable audio: its " + container + " header is malformed (" +
      err.message + ").");
  }
  const plays = media.browserPlays(container, codec);
  let created = null;
  let over = null;
  $app.runInTransaction((tx) => {
    // H4: the recording's audio is reserved in the transaction that creates it
    // (transactions run one at a time: a burst is counted upload by upload).
    const admitted = quotas.admit(tx, owner, now, length);
    over = admitted.over || null;
    if (over) return;
    const rec = new Record(tx.findCollectionByNameOrId("audio_records"));
    rec.set("quota_ms", admitted.reserveMs);
    rec.set("quota_at", now);
    rec.set("owner", owner);
    rec.set("title", title);
    rec.set("state", stages.UPLOADED);
    rec.set("state_entered_at", now);
    rec.set("attempts", 0);
    if (language !== "" && language !== "auto") rec.set("language_hint", language);
    tx.save(rec);
    transitions.enqueue(tx, rec);

    const row = new Record(tx.findCollectionByNameOrId("files"));
    row.set("record", rec.id);
    row.set("role", "original");
    row.set("format", container);
    row.set("codec", codec);
    row.set("browser_plays", plays ? "yes" : "no");
    row.set("name", String(file.originalName || file.name).slice(0, 300));
    row.set("size", file.size);
    row.set("blob", file);
    tx.save(row);

    journal.add(tx, rec.id, stages.UPLOADED, "accepted", "accepted " + file.size + " bytes (" + container + (codec ? "/" + codec : "") + (plays ? "" :
      ", which a browser does not play: a playable copy comes with normalize") + "), " +
      (admitted.reserveMs / 1000).toFixed(1) + " s of audio reserved (" + (length.declared ? "the length its header declares" :
        "its header declares no length: a guess from its size") + ")", "intake");
    live.publish(tx, rec);
    created = rec;
  });
  if (over) return quotas.refuse(e, over);
  return e.json(201, records.pollBody($app, created));
}

module.exports = { create: create, maxUploadBytes: maxUploadBytes };
