// Stand-in for Cursor CLI (not on npm) following its documented contract: config in
// $CURSOR_CONFIG_DIR (else ~/.cursor)/cli-config.json, chats/<hash>/<chatId>/store.db,
// `--resume <chatId>`, `--continue`, `-p PROMPT` (a prompt "!cmd" runs cmd with bash).
const fs = require("fs"), path = require("path"), os = require("os"), cp = require("child_process"), crypto = require("crypto");
const argv = process.argv.slice(2);
const dir = process.env.CURSOR_CONFIG_DIR || path.join(os.homedir(), ".cursor");
if (argv[0] === "--version") { console.log(require("./package.json").version); process.exit(0); }
fs.mkdirSync(dir, { recursive: true });
const cfg = path.join(dir, "cli-config.json");
if (!fs.existsSync(cfg)) fs.writeFileSync(cfg, JSON.stringify({ version: 1, editor: { vimMode: false }, permissions: { allow: [], deny: [] } }, null, 2));
const proj = crypto.createHash("md5").update(process.cwd()).digest("hex");
const chats = path.join(dir, "chats", proj);
let chatId = null, i = argv.indexOf("--resume");
if (i >= 0) chatId = argv[i + 1];
if (argv.includes("--continue") && fs.existsSync(chats)) chatId = fs.readdirSync(chats).sort().pop() || null;
console.log("Cursor Agent " + require("./package.json").version + " (tmuxjail stand-in)");
if (chatId) {
  const ok = fs.existsSync(path.join(chats, chatId, "store.db"));
  console.log(ok ? "Resumed chat " + chatId : "Chat not found: " + chatId);
} else {
  chatId = new Date().toISOString().replace(/[:.]/g, "-") + "-" + crypto.randomUUID();
  fs.mkdirSync(path.join(chats, chatId), { recursive: true });
  fs.writeFileSync(path.join(chats, chatId, "store.db"), "stand-in chat\n");
  console.log("New chat " + chatId);
}
console.log("Press any key to sign in (Cursor login needs the network)");
const p = argv.indexOf("-p");
if (p >= 0 && (argv[p + 1] || "").startsWith("!")) {
  const r = cp.spawnSync("bash", ["-c", argv[p + 1].slice(1)], { stdio: "inherit" });
  process.exit(r.status ?? 1);
}
setInterval(() => {}, 1 << 30);
