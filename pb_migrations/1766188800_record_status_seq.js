/// <reference path="../pb_data/types.d.ts" />
// The sender's live status gets an order: `record_status.seq` counts the
// writes of one recording's row (1, 2, …). PocketBase hands each realtime
// message to its subscriber in a goroutine of its own, so two changes made a
// few milliseconds apart (a claim, then the first progress) can arrive in
// either order; a client keeps the one with the highest `seq` (README,
// "realtime status"). Rows written before this start from 0.
migrate((app) => {
  const status = app.findCollectionByNameOrId("record_status");
  status.fields.add(new NumberField({
    name: "seq",
    onlyInt: true,
    min: 0,
    help: "How many times this row was written: the order of its realtime events (the highest is the newest).",
  }));
  app.save(status);
}, (app) => {
  const status = app.findCollectionByNameOrId("record_status");
  status.fields.removeByName("seq");
  app.save(status);
});
