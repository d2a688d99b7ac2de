//! Backend tests: the whole path from SQL through the final function and the
//! backend's generator, judged with the core crate's statistical harness.

#[pgrx::pg_schema]
mod tests {
    use dpnoise_core::audit::{chi_square, histogram};
    use dpnoise_core::{Epsilon, Laplace, LatticeNoise};
    use pgrx::prelude::*;

    /// The first column of every row of `sql`.
    fn column<T: pgrx::FromDatum + pgrx::IntoDatum>(sql: &str) -> Vec<T> {
        Spi::connect(|client| {
            client
                .select(sql, None, &[])
                .unwrap()
                .map(|row| row.get::<T>(1).unwrap().unwrap())
                .collect()
        })
    }

    #[pg_test]
    fn the_plan_cache_is_bounded_and_keeps_the_latest() {
        use dpnoise_core::{Choice, Delta, Loss, Request, Shape};
        let request = |i: u32| Request {
            choice: Choice::Auto,
            epsilon: Epsilon::new(0.5 + f64::from(i) / 1024.0).unwrap(),
            delta: Delta::ZERO,
            loss: Loss::Variance,
            shape: Shape::Count,
            groups: 1,
        };
        // Four times as many distinct plans as the cache holds: it never grows past its capacity.
        for i in 0..4 * crate::plans::capacity() as u32 {
            let plan = crate::plans::plan(request(i));
            assert_eq!(plan, request(i).plan().unwrap());
            assert!(
                crate::plans::len() <= crate::plans::capacity(),
                "{} plans kept",
                crate::plans::len()
            );
        }
        assert_eq!(crate::plans::len(), crate::plans::capacity());
    }

    #[pg_test]
    fn dp_count_noise_is_two_sided_geometric() {
        // 20 000 groups of 10 rows: each noisy count minus 10 is one noise draw.
        let draws = column::<i64>(
            "SELECT dp_count(1.0) - 10 FROM generate_series(1, 10) a, generate_series(1, 20000) g GROUP BY g",
        );
        assert_eq!(draws.len(), 20_000);
        let mut it = draws.iter();
        let h = histogram(draws.len(), || *it.next().unwrap() as i128);
        let lap = Laplace::new(Epsilon::new(1.0).unwrap(), 1).unwrap();
        let test = chi_square(&h, |n| lap.pmf(n), -15, 15, 1e-6);
        assert!(test.passes(), "{test:?}");
        // The same draws do not pass for noise calibrated to ε = 2 (negative control).
        let wrong = Laplace::new(Epsilon::new(2.0).unwrap(), 1).unwrap();
        assert!(!chi_square(&h, |n| wrong.pmf(n), -15, 15, 1e-6).passes());
    }

    #[pg_test]
    fn dp_laplace_releases_lie_on_the_lattice_with_the_right_spread() {
        let out = column::<f64>("SELECT dp_laplace(0, 1.0, 1.0) FROM generate_series(1, 20000)");
        let g = 2f64.powi(-40);
        assert!(out.iter().all(|x| (x / g).fract() == 0.0));
        // E|X| = scale = 1 for Laplace(1); standard error of the mean of |X| is 1/√n.
        let mean_abs = out.iter().map(|x| x.abs()).sum::<f64>() / out.len() as f64;
        assert!(
            (mean_abs - 1.0).abs() < 5.0 / (out.len() as f64).sqrt(),
            "{mean_abs}"
        );
    }

    #[pg_test]
    fn the_seed_makes_noise_reproducible_and_every_set_restarts_it() {
        Spi::run("SET dpnoise.seed = '42'").unwrap();
        let a = column::<f64>("SELECT dp_laplace(0, 1.0, 1.0) FROM generate_series(1, 5)");
        Spi::run("SET dpnoise.seed = '42'").unwrap();
        let b = column::<f64>("SELECT dp_laplace(0, 1.0, 1.0) FROM generate_series(1, 5)");
        assert_eq!(a, b);
        Spi::run("RESET dpnoise.seed").unwrap();
        let c = column::<f64>("SELECT dp_laplace(0, 1.0, 1.0) FROM generate_series(1, 5)");
        assert_ne!(a, c);
    }

    #[pg_test]
    fn empty_input_still_gets_a_noisy_answer() {
        let v = Spi::get_one::<f64>(
            "SELECT dp_sum_laplace(x, 1.0, 0, 100) FROM (SELECT 1.0::float8 AS x) t WHERE false",
        )
        .unwrap();
        assert!(v.is_some());
        let c = Spi::get_one::<i64>("SELECT dp_count(0.5) FROM generate_series(1, 0)").unwrap();
        assert!(c.is_some());
    }

    #[pg_test]
    fn parallel_plan_releases_the_same_exact_sum_as_serial() {
        Spi::run(
            "CREATE TABLE par AS SELECT (i % 1000) * 0.001 AS x FROM generate_series(1, 200000) i",
        )
        .unwrap();
        Spi::run("ANALYZE par").unwrap();
        let query = "SELECT dp_sum_laplace(x, 1.0, 0, 1) FROM par";
        Spi::run("SET max_parallel_workers_per_gather = 0").unwrap();
        Spi::run("SET dpnoise.seed = '7'").unwrap();
        let serial = Spi::get_one::<f64>(query).unwrap();
        Spi::run(
            "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; \
             SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0",
        )
        .unwrap();
        let plan: Vec<String> = Spi::connect(|client| {
            client
                .select(&format!("EXPLAIN (COSTS OFF) {query}"), None, &[])
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect()
        });
        assert!(
            plan.iter().any(|l| l.contains("Partial Aggregate")),
            "{plan:?}"
        );
        Spi::run("SET dpnoise.seed = '7'").unwrap();
        let parallel = Spi::get_one::<f64>(query).unwrap();
        // Same seed, same noise: equal releases mean bit-identical exact sums.
        assert_eq!(serial, parallel);
    }

    #[pg_test(error = "epsilon must be a finite number in [2^-30, 1000], got 0")]
    fn zero_epsilon_is_refused() {
        Spi::get_one::<i64>("SELECT dp_count(0.0) FROM generate_series(1, 3)").unwrap();
    }

    #[pg_test(error = "dp_count cannot be used as a window function")]
    fn window_use_is_refused() {
        Spi::get_one::<i64>("SELECT dp_count(1.0) OVER () FROM generate_series(1, 3)").unwrap();
    }

    #[pg_test]
    fn dp_staircase_draws_match_dp_accuracy() {
        // 20 000 draws at ε = 5, where the staircase's variance is 0.37 of Laplace's.
        let out = column::<f64>("SELECT dp_staircase(0, 5.0, 1.0) FROM generate_series(1, 20000)");
        let n = out.len() as f64;
        let (mae, sd) = Spi::get_two::<f64, f64>(
            "SELECT mean_abs_error, std_dev FROM dp_accuracy('staircase', 5.0, 1.0)",
        )
        .unwrap();
        let (mae, sd) = (mae.unwrap(), sd.unwrap());
        let sq: Vec<f64> = out.iter().map(|x| x * x).collect();
        let mean_sq = sq.iter().sum::<f64>() / n;
        let se_sq = (sq.iter().map(|v| (v - mean_sq).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
        assert!(
            (mean_sq - sd * sd).abs() < 5.0 * se_sq,
            "{mean_sq} vs {}",
            sd * sd
        );
        let mean_abs = out.iter().map(|x| x.abs()).sum::<f64>() / n;
        assert!(
            (mean_abs - mae).abs() < 5.0 * sd / n.sqrt(),
            "{mean_abs} vs {mae}"
        );
        // Laplace at the same ε has 2.7× the variance: the test tells them apart.
        let laplace_var = 2.0 / 25.0;
        assert!((mean_sq - laplace_var).abs() > 5.0 * se_sq);
    }
}
