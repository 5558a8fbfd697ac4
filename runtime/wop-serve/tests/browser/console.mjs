// Opens the wop console in headless Chromium (Debian's /usr/bin/chromium,
// driven by the pinned playwright-core), signs in with a token, and prints
// one JSON line of what the page shows; saves a screenshot.
//
// usage: node console.mjs <base-url> <token> <screenshot.png> <run> <tenant>
import { chromium } from "playwright-core";

const [base, token, shot, run, tenant] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  await page.goto(`${base}/console`);
  const beforeLogin = await page.locator("#sign-in").count();
  await page.fill("#token", token);
  await Promise.all([page.waitForNavigation(), page.click("#sign-in")]);
  const packs = await page.locator("#packs tr.pack td:first-child").allTextContents();
  const provenance = await page.locator("#packs tr.pack td.provenance").allTextContents();
  const codes = await page.locator("#recent tr.invocation td.code").allTextContents();
  const series = await page.locator("#cost-chart polyline.series").count();
  const points = await page.locator("#cost-chart polyline.series").first().getAttribute("points");
  const chartBox = await page.locator("#cost-chart").boundingBox();
  // One run's effects through the form.
  await page.fill("input[name=tenant]", tenant);
  await page.fill("input[name=run]", run);
  await Promise.all([page.waitForNavigation(), page.click("#effects button")]);
  const effects = await page.locator("#effects tr.effect").count();
  await page.screenshot({ path: shot, fullPage: true });
  const cookies = await page.context().cookies();
  console.log(JSON.stringify({
    beforeLogin, packs, provenance, codes, series, points: (points || "").split(" ").length,
    chartWidth: chartBox ? chartBox.width : 0, effects,
    cookie: cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite })),
    tokenInPage: (await page.content()).includes(token),
  }));
} finally {
  await browser.close();
}
