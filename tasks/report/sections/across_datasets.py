"""Across datasets: average ranks and normalized scores, the Friedman test, the critical
difference, Elo and win rates."""

from __future__ import annotations

from tasks.report import jobs, plots, ranking
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    table, folder, alpha, render = context.table, context.folder, context.alpha, context.markdown_table
    sampled = jobs.sampled_fits(table)
    if sampled:
        context.notes.append("fitted on a sample of the training rows, the most their budget allows or the "
                             "suite's _max_train_rows (the fit_rows metric), and scored on the whole test "
                             "part: " + "; ".join(sampled))
    section = Section()
    datasets, frameworks = context.scores.shape
    cd_value = context.critical_difference
    if cd_value is not None:
        groups = ranking.cliques(context.average_ranks, cd_value)
        section.figures.append(plots.critical_difference(
            context.average_ranks, cd_value, groups, folder / "critical_difference.png", datasets=datasets,
            alpha=alpha))
    else:
        context.notes.append("critical difference needs at least 2 datasets and 2 frameworks")
    if context.anchor != context.baseline:
        context.notes.append(f"Elo anchor: '{context.baseline}' is not in these runs, so '{context.anchor}' "
                             "(lowest average rank) is 1000")
    elo_table = context.elo_table
    if elo_table is not None:
        section.figures.append(plots.elo(elo_table, context.anchor, folder / "elo.png"))
        wins = ranking.win_rates(context.cells)
        section.figures.append(plots.win_rate(wins, folder / "win_rate.png"))
        wins.to_csv(folder / "win_rate.csv")
        elo_table.to_csv(folder / "elo.csv", index=False)
    context.totals.to_csv(folder / "aggregate.csv", index=False)
    context.rank_table.assign(imputed=context.imputed.any(axis=1)).to_csv(folder / "ranks.csv")
    context.cells.to_csv(folder / "scores_imputed.csv", index=False)

    lines = [
        "## Across datasets",
        "",
        "Average rank (1 = best) and mean normalized score (0 = baseline, 1 = best per dataset), "
        "unweighted and weighted by dataset rows. Failed jobs score as the constant predictor "
        "(imputed_datasets counts the datasets where that happened).",
        "",
        render(context.totals),
        "",
    ]
    test = context.friedman
    if test is not None:
        verdict = "differ" if test.p_value < alpha else "do not differ significantly"
        lines += [
            f"Friedman test over {test.datasets} datasets x {test.frameworks} frameworks: "
            f"chi2 = {test.statistic:.3f}, p = {test.p_value:.3g} (Iman-Davenport F = "
            f"{test.iman_davenport_f:.3f}, p = {test.iman_davenport_p:.3g}): the average ranks {verdict} "
            f"at alpha = {alpha}."
        ]
    if cd_value is not None:
        lines += [f"Nemenyi critical difference: {cd_value:.3f} ranks.", ""]
    if elo_table is not None:
        lines += [f"## Elo (Bradley-Terry, 95% bootstrap interval; {context.anchor} = 1000)", "",
                  render(elo_table, 5), ""]
    imputed_cells = [f"{fw} on {ds}" for ds, row in context.imputed.iterrows() for fw, flag in row.items()
                     if flag]
    if imputed_cells:
        lines += ["Imputed with the constant predictor's score (failed or missing jobs): "
                  + ", ".join(imputed_cells) + ".", ""]
    section.lines = lines
    return section


SECTION = ReportSection("across datasets", 100, build)
