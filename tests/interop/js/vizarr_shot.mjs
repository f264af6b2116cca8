// Opens a page (vizarr, served on localhost by test_vizarr.py) in Debian's
// chromium through playwright-core, waits until the page has drawn, saves
// a screenshot and prints one JSON line: {"ok", "log": [{type, text}]}
// with the console messages, page errors and failed requests.
//   node vizarr_shot.mjs URL OUT.png [WAIT_MS, default 60000]
// Every request off localhost is answered here, never sent: vizarr's bundle
// imports its JPEG-2000 decoder (pdf.js's jpx.js) from a CDN at load time;
// a stub module stands in (tessera writes no JPEG-2000).
import { chromium } from "playwright-core";

const [url, out, waitMs] = process.argv.slice(2);
const log = [];
let browser;
try {
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    // Without the background-networking flags chromium's own connections
    // are refused by a closed network, many at a time.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
  });
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  page.on("console", (m) => log.push({ type: m.type(), text: m.text() }));
  page.on("pageerror", (e) => log.push({ type: "pageerror", text: String(e) }));
  page.on("requestfailed", (r) => log.push({ type: "requestfailed", text: `${r.url()} ${r.failure()?.errorText}` }));
  await page.route(/^https?:\/\/(?!127\.0\.0\.1[:/])/, (route) => {
    log.push({ type: "stubbed", text: route.request().url() });
    route.fulfill({
      status: 200,
      contentType: "text/javascript",
      body: "export class JpxImage { static decode() { throw new Error('no JPEG-2000 decoder (stub)'); } }\n",
    });
  });
  // At least 6 s (the bundle's parse and the metadata requests leave
  // quiet gaps), then until the chunk requests are done (network idle, up
  // to WAIT_MS in all), then 3 s for the drawing.
  const t0 = Date.now(), limit = Number(waitMs || 60000);
  await page.goto(url);
  await page.waitForTimeout(6000);
  await page.waitForLoadState("networkidle", { timeout: Math.max(1000, limit - (Date.now() - t0)) }).catch(() => {});
  await page.waitForTimeout(3000);
  await page.screenshot({ path: out });
  console.log(JSON.stringify({ ok: true, log }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e), log }));
} finally {
  if (browser) await browser.close();
}
