// Groovy for agent_jvm_languages_test.cpp: dynamic dispatch through Groovy's call-site caches,
// closures, GStrings, maps with defaults, sorting with a comparator closure, regex, and recursion
// 30-59 calls deep through `render`. Two threads until SECS seconds have passed.
def render(int depth, Map data) {
  if (depth == 0) return data.collect { k, v -> "<$k>${v.toString().toUpperCase()}</$k>" }.join()
  return "<div>" + render(depth - 1, data) + "</div>"
}

def fib(n) { n < 2 ? n : fib(n - 1) + fib(n - 2) }

long deadline = System.currentTimeMillis() + 1000L * ((System.getenv('SECS') ?: '5') as long)
def threads = (1..2).collect {
  Thread.start {
    long acc = 0
    def rnd = new Random()
    while (System.currentTimeMillis() < deadline) {
      def s = render(30 + rnd.nextInt(30), [a: rnd.nextInt(1000), b: 'x' * 20, c: [1, 2, 3].sum()])
      acc += (s =~ /A|B/).count
      def counts = [:].withDefault { 0 }
      (1..2000).each { i -> counts["w${i * 7919 % 1000}".toString()] += 1 }
      acc += counts.sort { a, b -> b.value <=> a.value ?: a.key <=> b.key }.take(10).size()
      acc += fib(16)
    }
    acc
  }
}
threads*.join()
println 'done'
