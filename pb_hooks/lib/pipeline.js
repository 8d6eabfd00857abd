// The pipeline's internal routes (pipeline.pb.js), each declared once in ROUTES: the
// claim, the one settle, and what a step reads, writes and notes under its claim; what a
// step stores of a recording is lib/attachments.js's. Open to the service user only
// (anonymous 401, any other account 403). The protocol is lib/claim.js, lib/settle.js and
// lib/transitions.js.
const args = require("./args.js");
const attachments = require("./attachments.js");
const claims = require("./claim.js");
const deadlines = require("./deadlines.js");
const followups = require("./followups.js");
const insights = require("./insights.js");
const journal = require("./journal.js");
const literary = require("./literary.js");
const routes = require("./routes.js");
const settings = require("./settings.js");
const settle = require("./settle.js");
const words = require("./words.js");

// P1: the next claimable record (or, when the caller takes the work of follow-up queues
// and no recording waits, a row of one of them), with a new claim token: 200 {id, token,
// …}, or 204 with `X-Next-Available-At` when something leased or paused will be. Rows the
// claim could not read are set aside on the way and named in `X-Set-Aside`.
// Body: {now, leases: {stage: ms}, follow_ups?: {queue: ms}, insights_lease? (the insights
// queue's, as older workers send it), with_record?, with_rows?}.
function claim(e) {
  return routes.handle(e, (body) => {
    const now = args.count(body, "now");
    if (typeof body.leases !== "object" || body.leases === null) throw new args.Invalid("'leases' must map stages to lease milliseconds");
    // The follow-up queues whose work the caller takes too (only when no recording waits).
    const followUps = followups.leasesAsked(body);
    if (followUps === null) throw new args.Invalid("'follow_ups' must map follow-up queues to lease milliseconds");
    // A claimer that asks gets a recording's files and attempts with it (rows, never their content:
    // ST7), which its step reads first: read and checked inside the claim's transaction.
    const result = claims.claim($app, now, body.leases, followUps, body.with_rows === true);
    // Rows the claim could not read were halted on the way (`unclaimable`): the claimer logs and counts them.
    if (result.setAside.length > 0) e.response.header().set("X-Set-Aside", result.setAside.join(","));
    const got = result.claimed;
    // P1: {id, token}; a claimer that asks gets the record's queue fields too (saves a read).
    if (got) {
      if (body.with_record === true) return e.json(200, got);
      return e.json(200, got.queue ? { id: got.id, token: got.token, queue: got.queue } : { id: got.id, token: got.token });
    }
    // Stopped setting rows aside before finding work: more may be due at once.
    if (result.more) {
      e.response.header().set("X-Next-Available-At", String(now));
      return e.noContent(204);
    }
    const next = claims.nextAvailableAt($app, now, followUps);
    if (next > 0) e.response.header().set("X-Next-Available-At", String(next));
    return e.noContent(204);
  });
}

// The one fenced write that settles a claim (or keeps it: `extended`, `progressed`), for
// both queues: a recording's stages (records/…) and its insights (insights/…). Body:
// {token, now, outcome, …the outcome's own arguments}; the outcomes and what each
// writes are lib/transitions.js's. Answers 200 with the row as written (the claim's
// shape), 409 fenced_out when the claim is no longer the caller's, 400 for a bad request.
function settleClaim(e) {
  const table = routes.tableOf(e);
  return routes.fenced(e, table, (body) => settle.request($app, table, body), (tx, rec, s) => settle.settle(tx, table, rec, s));
}

// A journal note of the step, on its recording's journal (an insights row's on its
// recording's): {token, text, write_key}.
function note(e) {
  const table = routes.tableOf(e);
  return routes.fenced(e, table, null, (tx, rec, _, body) => {
    const where = journal.at(table, rec);
    const key = args.optText(body, "write_key", 100) || "";
    // O4: a repeat of a note that landed is not written again.
    if (!settle.writtenBefore(tx, "record_events", where[0], key)) {
      journal.add(tx, where[0], where[1], "note", args.text(body, "text", 5000), "worker", key);
    }
    return { ok: true };
  });
}

// What the insights step reads, under its claim: the recording's transcript and its
// owner's dictionary of topics. The owner comes from the row, never from the caller: no
// request can carry another sender's topics.
function insightsSource(e) {
  return routes.fenced(e, "insights", null, (tx, row) => insights.source(tx, row));
}

// The brief (with the quotes that ground it) and the topics, written under the claim in
// one transaction: new topics join the owner's dictionary, the brief and the topics land
// on the recording.
function insightsResult(e) {
  return routes.fenced(e, "insights", (body) => args.count(body, "now"), (tx, row, now, body) => {
    insights.store(tx, row, body, now);
    return { ok: true };
  });
}

// What the literary step reads, under its claim: the recording's transcript (lib/literary.js).
function literarySource(e) {
  return routes.fenced(e, "literary", null, (tx, row) => literary.source(tx, row));
}

// The literary text and its paragraphs, written under the claim as the recording's texts row
// of kind literary.
function literaryResult(e) {
  return routes.fenced(e, "literary", (body) => literary.request(e, body), (tx, row, a) => {
    literary.store(tx, row, a);
    return { ok: true };
  });
}

// What recognition is biased towards, under a recording's claim: its sender's words and
// topics (lib/words.js). The sender comes from the record, never from the caller.
function recordWords(e) {
  return routes.fenced(e, "audio_records", null, (tx, rec) => ({ words: words.of(tx, rec.getString("owner")) }));
}

// Each route: "METHOD path" → its function, and the body limit it takes (bytes, 0: none;
// absent: PocketBase's default).
const ROUTES = {
  "POST /api/pipeline/claim": { serve: claim },
  "POST /api/pipeline/records/{id}/settle": { serve: settleClaim },
  "POST /api/pipeline/records/{id}/events": { serve: note },
  "POST /api/pipeline/records/{id}/words": { serve: recordWords },
  "POST /api/pipeline/insights/{id}/source": { serve: insightsSource },
  "POST /api/pipeline/insights/{id}/result": { serve: insightsResult },
  "POST /api/pipeline/literary/{id}/source": { serve: literarySource },
  "POST /api/pipeline/literary/{id}/result": { serve: literaryResult, bodyLimit: 256 * 1024 * 1024 },
  "POST /api/pipeline/records/{id}/files": { serve: attachments.attachFile, bodyLimit: 0 },
  "POST /api/pipeline/records/{id}/audio": { serve: attachments.chargeAudio },
  "POST /api/pipeline/records/{id}/attempts": { serve: attachments.addAttempt },
  "POST /api/pipeline/records/{id}/attempts/{aid}": { serve: attachments.updateAttempt, bodyLimit: 0 },
  "PUT /api/pipeline/records/{id}/texts/{kind}": { serve: attachments.putText, bodyLimit: 256 * 1024 * 1024 },
  "POST /api/pipeline/attempts/{aid}/copies": { serve: attachments.copiesRemoved },
  "POST /api/pipeline/records/{id}/normalized/remove": { serve: attachments.removeNormalized },
  "GET /api/pipeline/files/{collection}/{record}/{filename}": { serve: attachments.download },
};

// Every follow-up queue (lib/followups.js) is settled and notes its journal as a recording does.
for (const queue of followups.names()) {
  ROUTES["POST /api/pipeline/" + queue + "/{id}/settle"] = { serve: settleClaim };
  ROUTES["POST /api/pipeline/" + queue + "/{id}/events"] = { serve: note };
}

// Answers a request to one of ROUTES (the router names the pattern it matched). A route
// that takes a large body (a normalized recording, a raw result: a body limit of its own)
// reads it for as long as an upload may take, [intake] read_timeout: a worker on another
// host sends them over its own line. Every other route has the server's read timeout.
function serve(e) {
  const route = ROUTES[e.request.pattern];
  if (route.bodyLimit !== undefined) deadlines.allowBody(e, settings.ms("intake", "read_timeout"));
  return route.serve(e);
}

module.exports = { ROUTES: ROUTES, serve: serve };
