// The sender's live status over PocketBase's realtime (README, "realtime status").
//
// Every write that changes what the poll shows of a recording (intake, the
// claim, the fenced transitions and progress, a halt set aside, the owner's
// panel, the sender's resume and rename) calls `publish` inside its own
// transaction. When the recording's owner has a realtime subscription to
// `record_status` open, its row there is written with the poll body (no
// text); PocketBase then sends the change, after the commit, to every
// subscriber whose list or view rule admits the row: its owner alone.
//
// Why a row and not a message sent from here: a hook's send to a client waits
// until that client's stream takes it, so one sender whose browser stopped
// reading could hold up the pipeline's own writes. PocketBase's broadcast of a
// saved row hands each message over in the background — each in a goroutine
// of its own, so two changes close together may arrive in either order: the
// row's `seq` numbers them, and a client keeps the highest.
const records = require("./records.js");

const COLLECTION = "record_status";

// Whether a client signed in as `ownerId` (a sender) subscribes to this collection's events.
function listened(app, ownerId) {
  const clients = app.subscriptionsBroker().clients();
  for (const id in clients) {
    const client = clients[id];
    if (client.isDiscarded()) continue;
    const subs = client.subscriptions(COLLECTION);
    // `subs` is a Go map: for…in is how the VM walks one; the first key is enough.
    let any = false;
    // oxlint-disable-next-line no-unused-vars
    for (const _ in subs) {
      any = true;
      break;
    }
    if (!any) continue;
    const auth = client.get("auth");
    if (auth && auth.id === ownerId && auth.collection().name === "users") return true;
  }
  return false;
}

// `rec` (or the id of) an audio record as stored now inside `app` (the caller's
// transaction). Never fails the write it follows: a status that cannot be
// written is logged, and the sender's page catches up at its next reload.
// `owner` (optional, with an id): the recording's sender, when the caller
// knows it, so that nothing is read when no one listens.
function publish(app, rec, owner) {
  try {
    if (typeof rec === "string" && owner && !listened(app, owner)) return;
    write(app, rec);
  } catch (err) {
    app.logger().warn("live status not written", "record", typeof rec === "string" ? rec : rec.id, "error", String(err));
  }
}

function write(app, rec) {
  if (typeof rec === "string") rec = app.findRecordById("audio_records", rec);
  const owner = rec.getString("owner");
  if (owner === "" || !listened(app, owner)) return;
  let row;
  try {
    row = app.findRecordById(COLLECTION, rec.id);
  } catch (_) {
    row = new Record(app.findCachedCollectionByNameOrId(COLLECTION));
    row.set("id", rec.id);
  }
  row.set("owner", owner);
  row.set("poll", records.pollBody(app, rec, false));
  // The order of this recording's events: written inside the caller's transaction on
  // the single write connection, so two writes never take the same number.
  row.set("seq", row.getInt("seq") + 1);
  app.save(row);
}

module.exports = { publish: publish };
