// The page's frame: the notice line, the tabs, the sidebar that collapses on a phone.
import { $ } from "./dom.js";

const PHONE = window.matchMedia("(max-width: 760px)");

export function notify(text, kind) {
  const box = $("notice");
  if (!text) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.className = "notice" + (kind === "info" ? " info" : "");
  box.textContent = text;
}

export function setSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("sidebar-toggle").setAttribute("aria-expanded", String(open));
  if (PHONE.matches) $("sidebar").inert = !open;
  if (open && PHONE.matches) {
    const current = document.querySelector(".conversation .open[aria-current]") || $("new-chat");
    current.focus();
  }
}

export function closeSidebarOnPhone() {
  if (PHONE.matches && document.body.classList.contains("sidebar-open")) {
    setSidebar(false);
    $("sidebar-toggle").focus();
  }
}

export function wireSidebar() {
  $("sidebar-toggle").addEventListener("click", () => setSidebar(!document.body.classList.contains("sidebar-open")));
  $("scrim").addEventListener("click", () => closeSidebarOnPhone());
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && PHONE.matches && document.body.classList.contains("sidebar-open")) closeSidebarOnPhone();
  });
  const layout = () => {
    // On a wide screen the sidebar is always there; on a phone it starts closed.
    $("sidebar").inert = PHONE.matches && !document.body.classList.contains("sidebar-open");
    $("sidebar-toggle").setAttribute("aria-expanded", String(!PHONE.matches || document.body.classList.contains("sidebar-open")));
  };
  PHONE.addEventListener("change", layout);
  layout();
}

const TABS = ["chat", "runs", "schedules", "usage"];

export function showTab(name) {
  document.body.dataset.view = name;
  for (const tab of TABS) {
    const view = $(`${tab}-view`);
    if (view) view.hidden = tab !== name;
    const button = $(`tab-${tab}`);
    if (button) {
      if (tab === name) button.setAttribute("aria-current", "page");
      else button.removeAttribute("aria-current");
    }
  }
}
