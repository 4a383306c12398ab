;; Clojure for agent_jvm_languages_test.cpp: functions compiled to classes, persistent collections,
;; lazy sequences, a multimethod, futures, string building, and recursion 40-79 calls deep through
;; `nest`. Two futures until SECS seconds have passed.
(require 'clojure.string)

(defmulti area :shape)
(defmethod area :circle [{:keys [r]}] (* Math/PI r r))
(defmethod area :rect [{:keys [w h]}] (* w h))

(defn nest [d x]
  (if (zero? d) (clojure.string/upper-case (str x)) (str "(" (nest (dec d) x) ")")))

(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))

(defn work [deadline]
  (loop [acc 0]
    (if (> (System/currentTimeMillis) deadline)
      acc
      (let [shapes (for [i (range 2000)] (if (even? i) {:shape :circle :r i} {:shape :rect :w i :h 2}))
            total (reduce + (map area shapes))
            freq (frequencies (map #(mod % 97) (range 20000)))
            s (nest (+ 40 (rand-int 40)) total)
            words (clojure.string/split (apply str (interpose " " (map str (range 3000)))) #" ")]
        (recur (+ acc (count freq) (count s) (count (sort words)) (fib 16)))))))

(let [deadline (+ (System/currentTimeMillis) (* 1000 (Long/parseLong (or (System/getenv "SECS") "5"))))
      futures [(future (work deadline)) (future (work deadline))]]
  (println (reduce + (map deref futures)))
  (shutdown-agents))
