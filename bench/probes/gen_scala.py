#!/usr/bin/env python3
"""Writes the Scala source the Scalac probe compiles: CLASSES groups of a trait, a case class and an
object, each using generics, pattern matching, implicits and for-comprehensions.
Usage: gen_scala.py OUT.scala [CLASSES=30]"""
import sys

out, classes = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
parts = ["package gen", "import scala.collection.mutable", ""]
for i in range(classes):
    parts.append(f"""trait T{i}[A] {{ def f{i}(a: A): A; def g{i}(xs: List[A]): List[A] = xs.map(f{i}).filter(_ != null) }}
case class C{i}(x: Int, y: String, z: Option[Double]) extends T{i}[Int] {{
  def f{i}(a: Int): Int = a * {i + 1} + x
  def h(n: Int): Seq[(Int, String)] = for (k <- 0 until n if k % {i % 5 + 2} == 0; s = y * (k % 3)) yield (k + x, s.reverse)
  def m: Map[String, List[Int]] = (0 to {i + 10}).groupBy(k => (k % 7).toString).map {{ case (k, v) => k -> v.toList.sorted }}
  def pm(o: Any): String = o match {{
    case C{i}(a, b, Some(d)) if a > 3 => b + d.toString
    case (a: Int, b: String) => b * a
    case xs: List[_] => xs.mkString(",")
    case _ => "?"
  }}
}}
object O{i} {{
  implicit class R(val s: String) extends AnyVal {{ def twice: String = s + s }}
  def run(n: Int): Int = {{
    val b = mutable.ArrayBuffer.empty[C{i}]
    for (k <- 0 until n) b += C{i}(k, "s" + k, if (k % 2 == 0) Some(k * 1.5) else None)
    b.map(c => c.f{i}(c.x) + c.h(5).size + c.pm(c).twice.length).sum
  }}
}}""")
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(parts) + "\n")
