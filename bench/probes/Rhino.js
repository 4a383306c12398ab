// Rhino probe (bench/probes.sh: Rhino compiles it to bytecode, RhinoInterp interprets it): closures,
// string building, regexes, sorting with a comparator, recursion of random depth, for SECONDS (argument).
var seconds = parseFloat(arguments.length > 0 ? arguments[0] : "8");
var end = java.lang.System.currentTimeMillis() + seconds * 1000;
function Rng(seed) { this.s = seed; }
Rng.prototype.next = function () { this.s = (this.s * 1103515245 + 12345) & 0x7fffffff; return this.s; };
var rng = new Rng(42);
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function deep(n, acc) { if (n == 0) return acc.length; return deep(n - 1, acc + String.fromCharCode(97 + n % 26)); }
function render(obj, depth) {
  if (depth > 4 || typeof obj != "object") return String(obj);
  var parts = [];
  for (var k in obj) parts.push(k + ":" + render(obj[k], depth + 1));
  return "{" + parts.join(",") + "}";
}
function makeObj(d) {
  var o = {};
  for (var i = 0; i < 4; i++) o["k" + i + "_" + (rng.next() % 100)] = d > 0 ? makeObj(d - 1) : rng.next() % 1000;
  return o;
}
var re = /([a-z]+)_(\d+)/g;
var total = 0, rounds = 0;
while (java.lang.System.currentTimeMillis() < end) {
  total += fib(18);
  total += deep(50 + rng.next() % 150, "");
  var s = render(makeObj(3), 0);
  var m, c = 0;
  while ((m = re.exec(s)) !== null) c += m[2].length;
  total += c;
  var arr = [];
  for (var i = 0; i < 500; i++) arr.push({v: rng.next() % 10000, name: "n" + i});
  arr.sort(function (a, b) { return a.v - b.v || (a.name < b.name ? -1 : 1); });
  total += arr[0].v;
  var words = s.split(/[{},:]/).filter(function (w) { return w.length > 2; }).map(function (w) { return w.toUpperCase(); });
  total += words.join("-").replace(/K/g, "q").length;
  rounds++;
}
print("rounds " + rounds + " total " + total);
