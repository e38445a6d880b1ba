// Markdown as people expect it in a chat (GFM tables, lists, code), rendered in the browser
// while the answer streams. Safety in two layers: raw HTML a model writes is escaped by the
// renderer (it shows as text), and the result is cleaned by DOMPurify before it reaches the
// page. Images become links (the CSP loads no remote image). Code is highlighted by
// highlight.js and gets a Copy button. Re-rendering keeps every unchanged node (morph), so a
// streaming answer never flickers and a finished block is never rebuilt.
import { Marked, Renderer } from "marked";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const LANGUAGES = { bash, c, cpp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]);
}

function highlighted(text, language) {
  if (language && hljs.getLanguage(language)) {
    try {
      return hljs.highlight(text, { language, ignoreIllegals: true }).value;
    } catch (_) { /* shown plain */ }
  }
  return escapeHtml(text);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Markup in a model's answer is text.
    html({ text }) { return escapeHtml(text); },
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
    code({ text, lang }) {
      const language = ((lang || "").match(/^[\w+#.-]*/) || [""])[0].toLowerCase();
      const label = language || "text";
      return `<div class="code-block"><div class="code-head"><span class="code-lang">${escapeHtml(label)}</span>` +
        `<button type="button" class="copy-code" aria-label="Copy ${escapeHtml(label)} code">Copy</button></div>` +
        `<pre tabindex="0"><code class="hljs">${highlighted(text, language)}</code></pre></div>`;
    },
    table(token) {
      // A wide table scrolls inside its own box, never the page.
      return `<div class="table-scroll" tabindex="0">${Renderer.prototype.table.call(this, token)}</div>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "form", "input", "textarea", "select", "iframe", "object", "embed", "svg", "math"],
  FORBID_ATTR: ["style"],
};

// Markdown text as a clean DocumentFragment.
export function renderMarkdown(text) {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, PURIFY);
}

function sameAttributes(a, b) {
  if (a.attributes.length !== b.attributes.length) return false;
  for (const attribute of a.attributes) {
    if (b.getAttribute(attribute.name) !== attribute.value) return false;
  }
  return true;
}

// Makes `parent`'s children equal to `fresh`'s, touching only what differs: unchanged leading
// nodes stay, the first changed element of the same kind is morphed in place, the rest swapped.
export function morph(parent, fresh) {
  const old = Array.from(parent.childNodes);
  const next = Array.from(fresh.childNodes);
  let i = 0;
  while (i < old.length && i < next.length && old[i].isEqualNode(next[i])) i++;
  let from = i;
  if (i < old.length && i < next.length) {
    const a = old[i], b = next[i];
    if (a.nodeType === Node.TEXT_NODE && b.nodeType === Node.TEXT_NODE) {
      a.data = b.data;
      from = i + 1;
    } else if (a.nodeType === Node.ELEMENT_NODE && a.nodeName === b.nodeName && sameAttributes(a, b)) {
      morph(a, b);
      from = i + 1;
    }
  }
  for (let j = old.length - 1; j >= from; j--) old[j].remove();
  for (let k = from; k < next.length; k++) parent.append(next[k]);
}

// One answer's Markdown, re-rendered at most once a frame while text arrives.
export class MarkdownView {
  constructor(node) {
    this.node = node;
    this.text = "";
    this.scheduled = 0;
  }

  append(text) { this.set(this.text + text); }

  set(text) {
    this.text = text;
    if (this.scheduled) return;
    this.scheduled = requestAnimationFrame(() => { this.scheduled = 0; this.render(); });
  }

  show(text) {
    this.text = text;
    this.flush();
  }

  flush() {
    if (this.scheduled) cancelAnimationFrame(this.scheduled);
    this.scheduled = 0;
    this.render();
  }

  render() {
    morph(this.node, renderMarkdown(this.text));
  }
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

// Copy buttons of code blocks (and of whole messages: [data-copy-from]).
export function wireCopyButtons(root) {
  root.addEventListener("click", async (event) => {
    const target = event.target.closest(".copy-code, .copy-message");
    if (!target) return;
    const source = target.classList.contains("copy-code")
      ? target.closest(".code-block").querySelector("code")
      : target.closest(".message").querySelector(".text");
    const text = target.classList.contains("copy-message") && target.closest(".message").dataset.raw !== undefined
      ? target.closest(".message").dataset.raw
      : source.textContent;
    const before = target.textContent;
    try {
      await copyText(text);
      target.textContent = "Copied";
    } catch (_) {
      target.textContent = "Copy failed";
    }
    setTimeout(() => { target.textContent = before; }, 1500);
  });
}
