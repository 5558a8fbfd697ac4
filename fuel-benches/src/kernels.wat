;; The four CPU kernels of the `kernels` testing pack
;; (sample-packs/testing/kernels), hand-written as one core module so engine
;; configurations can be compared without our packaging (no component, no
;; SDK, no JSON). Every export takes `n` (i32, unsigned) and returns an i64.
;; Fresh instance per call: memory starts zeroed.
(module
  (memory (export "memory") 1)

  ;; n steps of Knuth's MMIX LCG from 1: a dependent chain (latency-bound).
  (func (export "loop") (param $n i32) (result i64)
    (local $x i64) (local $i i32)
    (local.set $x (i64.const 1))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $x
          (i64.add (i64.mul (local.get $x) (i64.const 6364136223846793005))
                   (i64.const 1442695040888963407)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (local.get $x))

  ;; Total Collatz steps to reach 1 of every start value in 1..=n.
  (func (export "collatz") (param $n i32) (result i64)
    (local $start i64) (local $v i64) (local $steps i64)
    (local.set $start (i64.const 1))
    (block $all
      (loop $outer
        (br_if $all (i64.gt_u (local.get $start) (i64.extend_i32_u (local.get $n))))
        (local.set $v (local.get $start))
        (block $one
          (loop $inner
            (br_if $one (i64.le_u (local.get $v) (i64.const 1)))
            (local.set $v
              (if (result i64) (i64.eqz (i64.and (local.get $v) (i64.const 1)))
                (then (i64.shr_u (local.get $v) (i64.const 1)))
                (else (i64.add (i64.mul (local.get $v) (i64.const 3)) (i64.const 1)))))
            (local.set $steps (i64.add (local.get $steps) (i64.const 1)))
            (br $inner)))
        (local.set $start (i64.add (local.get $start) (i64.const 1)))
        (br $outer)))
    (local.get $steps))

  ;; Recursive fib(n): call-heavy.
  (func $fib (export "fib") (param $n i32) (result i64)
    (if (result i64) (i32.lt_u (local.get $n) (i32.const 2))
      (then (i64.extend_i32_u (local.get $n)))
      (else
        (i64.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                 (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  ;; The number of primes below n: sieve of Eratosthenes over n bytes of
  ;; linear memory (memory-heavy). Grows memory to fit n bytes.
  (func (export "sieve") (param $n i32) (result i64)
    (local $i i32) (local $j i32) (local $count i64) (local $need i32)
    (if (i32.lt_u (local.get $n) (i32.const 3)) (then (return (i64.const 0))))
    (local.set $need
      (i32.sub (i32.shr_u (i32.add (local.get $n) (i32.const 65535)) (i32.const 16))
               (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.lt_s (memory.grow (local.get $need)) (i32.const 0))
        (then (unreachable)))))
    (local.set $i (i32.const 2))
    (loop $outer
      (if (i32.eqz (i32.load8_u (local.get $i)))
        (then
          (local.set $count (i64.add (local.get $count) (i64.const 1)))
          ;; Mark from i*i, only if i*i < n (i <= n / i avoids overflow).
          (if (i32.le_u (local.get $i) (i32.div_u (local.get $n) (local.get $i)))
            (then
              (local.set $j (i32.mul (local.get $i) (local.get $i)))
              (block $marked
                (loop $mark
                  (br_if $marked (i32.ge_u (local.get $j) (local.get $n)))
                  (i32.store8 (local.get $j) (i32.const 1))
                  (local.set $j (i32.add (local.get $j) (local.get $i)))
                  (br $mark)))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $count))

  ;; `loop br 0`: never returns (for stop-latency measurements).
  (func (export "spin") (param $n i32) (result i64)
    (loop $l (br $l))
    (unreachable)))
