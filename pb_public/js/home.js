// The home screen (#/): the upload section above the sender's recordings, a page of them at a time,
// each row kept up to date by the live stream.
import * as api from "./api.js";
import { h } from "./dom.js";
import * as i18n from "./i18n.js";
import { t } from "./i18n.js";
import { latest, loadOptions, main, sayRefusal, state, whenLive } from "./shell.js";
import { haltText, progressBar, resumeButton, statusBadge, watchResumable } from "./status.js";
import { fillLanguages, uploadSection } from "./uploads.js";

const PER_PAGE = 20;

export function renderHome() {
  state.view = "home";
  state.record = null;
  main().replaceChildren(uploadSection(), listSection());
  loadOptions().then(fillLanguages).catch(() => {});
  loadList();
}

function listSection() {
  return h(
    "section",
    { class: "card", "aria-labelledby": "list-heading" },
    h(
      "div",
      { class: "section-head" },
      h("h2", { id: "list-heading" }, t("list.title")),
      h("span", { class: "live", id: "live" }, state.offline ? t("list.offline") : t("list.live")),
    ),
    h("ul", { class: "records", id: "records", "aria-busy": "true" }),
    h("nav", { class: "pager", id: "pager", "aria-label": t("list.title") }),
  );
}

let listToken = 0;
async function loadList() {
  const mine = ++listToken;
  const mark = latest.begin();
  let page;
  try {
    page = await api.list(state.page, PER_PAGE);
  } catch (err) {
    sayRefusal(err);
    return;
  }
  if (mine !== listToken || state.view !== "home") return;
  if (page.items.length === 0 && state.page > 1) {
    state.page = Math.max(1, page.totalPages);
    return loadList();
  }
  page.items = page.items.map((poll) => latest.settle(poll, mark));
  state.list = page;
  const list = document.getElementById("records");
  list.replaceChildren(...page.items.map(recordRow));
  list.setAttribute("aria-busy", "false");
  if (page.items.length === 0) list.append(h("li", { class: "empty" }, t("list.empty")));
  drawPager(page);
  watchResumable(page.items);
}

function drawPager(page) {
  const pager = document.getElementById("pager");
  if (!pager) return;
  pager.hidden = page.totalPages <= 1;
  const first = page.totalItems === 0 ? 0 : (page.page - 1) * page.perPage + 1;
  const last = Math.min(page.page * page.perPage, page.totalItems);
  const go = (to) => () => {
    state.page = to;
    loadList();
  };
  pager.replaceChildren(
    h("button", { type: "button", disabled: page.page <= 1, onclick: go(page.page - 1) }, t("list.newer")),
    h("span", { class: "range" }, t("list.range", {
      first: i18n.number(first), last: i18n.number(last), total: i18n.number(page.totalItems),
    })),
    h("button", { type: "button", disabled: page.page >= page.totalPages, onclick: go(page.page + 1) }, t("list.older")),
  );
}

function recordRow(poll) {
  const title = poll.title || t("list.untitled");
  const meta = [i18n.dateTime(poll.created)];
  if (poll.language) meta.push(i18n.languageName(poll.language));
  return h(
    "li",
    { class: "record", "data-id": poll.id, "data-status": poll.status, "data-activity": poll.activity },
    h("div", { class: "record-main" },
      h("a", { class: "record-title", href: "#/r/" + poll.id }, title),
      h("span", { class: "meta" }, meta.join(" · "))),
    h("div", { class: "record-state" }, statusBadge(poll), progressBar(poll)),
    poll.halted
      ? h("div", { class: "halt" }, h("span", {}, haltText(poll)), resumeButton(poll))
      : null,
  );
}

let refetch = 0;
whenLive("home", {
  refresh: loadList,
  status(poll) {
    if (!state.list) return;
    const at = state.list.items.findIndex((item) => item.id === poll.id);
    if (at >= 0) {
      state.list.items[at] = poll;
      const row = document.querySelector(`li.record[data-id="${poll.id}"]`);
      if (row) row.replaceWith(recordRow(poll));
    } else {
      // Not on this page (a new upload, or a page that moved): read the page again, once.
      clearTimeout(refetch);
      refetch = setTimeout(loadList, 200);
    }
  },
});
