// A loopback proxy for .ci/conformance: the MCP conformance suite sends no
// token, and nib answers 401 to every request without one. This adds
// `Authorization: Bearer $NIB_TOKEN` and forwards everything else as it came
// (method, path, Host, Origin and the other headers, the body, the streamed
// answer), so nib's own checks (Host, Origin, sessions, headers) are what the
// suite measures. argv[2]: a file that will hold nib's HOST:PORT. Prints the
// port it listens on.
import fs from "node:fs";
import http from "node:http";

const upstreamFile = process.argv[2];
const token = process.env.NIB_TOKEN;
const server = http.createServer((req, res) => {
  const [host, port] = fs.readFileSync(upstreamFile, "utf8").trim().split(":");
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request({ host, port, method: req.method, path: req.url, headers }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  up.on("error", (e) => {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end(`the conformance proxy could not reach nib: ${e.message}\n`);
  });
  req.pipe(up);
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
