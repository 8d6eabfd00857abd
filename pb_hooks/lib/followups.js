// The follow-up queues, each declared once: the work that follows a finished recording,
// on a queue of its own (a row per recording in the table of its name, with the queue
// fields of the insights migration). The claim, the transitions, the settle route, the
// journal and the set-aside read this declaration and name no follow-up themselves.
//
// Adding one: a migration making its table (and the `texts` kind or fields it writes),
// an entry here and in the sidecar's FOLLOW_UPS (sidecar/pipeline/stages.py), its step,
// and its routes. tests/unit/test_js_mirrors.py holds the names of both halves together.
// A declaration may also come from a file of the hooks' `followups/` directory (see `more`):
// none ships with the service; a test declares a queue of its own there and sees it claimed,
// settled and journalled with no other change (tests/integration/test_follow_up_table.py).
//
// Each queue: `journal`, the stage its events are journalled under on the recording;
// `what`, its row in words; `queued`, `done` and `again`, the journal's words when a
// finished recording is queued on it, when its step is done and when it is set to run
// again; `live`, whether its row changes what the sender's poll shows (lib/live.js).
// The order is the claim's: it tries them in this order, after every recording.
const QUEUES = {
  literary: {
    journal: "literary", what: "literary row", queued: "literary text queued (the literary step)",
    done: "literary text done", again: "the literary text will be made again", live: true,
  },
  insights: {
    journal: "insights", what: "insights row", queued: "brief and topics queued (the insights step)",
    done: "insights done", again: "the brief and topics will be made again", live: false,
  },
};

// More declarations: each `*.js` file of the hooks' `followups/` directory exports {name:
// declaration}, appended after those above in the order of the files' names. Read whenever this
// module loads (every runtime of the hooks loads it alike), so a declaration there reaches the
// claim, the settle route and the journal as one above does.
function more() {
  let entries;
  try {
    entries = $os.readDir(__hooks + "/followups");
  } catch (_) {
    return;  // no such directory: the service's own queues alone
  }
  const files = entries.map((entry) => entry.name()).filter((name) => name.endsWith(".js")).sort();
  for (const file of files) {
    const declared = require(__hooks + "/followups/" + file);
    for (const name in declared) {
      if (Object.prototype.hasOwnProperty.call(QUEUES, name)) throw new Error("follow-up queue '" + name + "' declared twice");
      QUEUES[name] = declared[name];
    }
  }
}
more();

// The declaration of follow-up queue `table`, or null for a table that is none (audio_records).
function of(table) {
  return Object.prototype.hasOwnProperty.call(QUEUES, table) ? QUEUES[table] : null;
}

// The follow-up queues' names, in claim order.
function names() {
  return Object.keys(QUEUES);
}

// The queues a worker's advance asks a finished recording to be queued on (`follow_ups`: names;
// `insights: true`: the insights queue, as workers of an earlier release ask), in claim order.
// Returns the names, or a name the declaration does not know as `unknown`.
function asked(body) {
  const list = Array.isArray(body.follow_ups) ? body.follow_ups : [];
  const unknown = list.filter((q) => !of(q));
  const legacy = body.insights === true ? ["insights"] : [];
  return { names: names().filter((q) => list.indexOf(q) >= 0 || legacy.indexOf(q) >= 0), unknown: unknown };
}

// The follow-up leases a claim asks for (`follow_ups`: queue → ms; `insights_lease`: the insights
// queue's, as workers of an earlier release send it), unchecked (lib/claim.js checks them).
function leasesAsked(body) {
  const out = {};
  const given = body.follow_ups;
  if (given !== undefined && given !== null && (typeof given !== "object" || Array.isArray(given))) return null;
  for (const name in given || {}) out[name] = given[name];
  if (body.insights_lease !== undefined && body.insights_lease !== null) out.insights = body.insights_lease;
  return out;
}

module.exports = { QUEUES: QUEUES, of: of, names: names, asked: asked, leasesAsked: leasesAsked };
