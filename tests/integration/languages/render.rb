# Ruby on JRuby for agent_jvm_languages_test.cpp: JRuby's IR interpreter and its JIT to JVM bytecode,
# invokedynamic call sites, blocks, string building, hashes, sorting, regex, and recursion 30-59
# calls deep through `render`. Two threads until SECS seconds have passed.
require 'set'

def render(depth, data)
  return data.map { |k, v| "<#{k}>#{v.to_s.upcase}</#{k}>" }.join if depth == 0
  "<div>" + render(depth - 1, data) + "</div>"
end

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

def words(n)
  (1..n).map { |i| "w#{i * 7919 % 1000}" }
end

deadline = Time.now + (ENV['SECS'] || '5').to_f
threads = (1..2).map do
  Thread.new do
    acc = 0
    while Time.now < deadline
      data = { "a" => rand(1000), "b" => "x" * 20, "c" => [1, 2, 3].sum }
      acc += render(30 + rand(30), data).scan(/A|B/).size
      counts = Hash.new(0)
      words(2000).each { |w| counts[w] += 1 }
      acc += counts.sort_by { |k, v| [-v, k] }.first(10).size
      acc += fib(18)
      acc += Set.new(words(500)).size
    end
    acc
  end
end
puts threads.map(&:value).sum
